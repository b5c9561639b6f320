// Operand: one rank's part of a matched op as the data path sees it. The session owns the op
// (its PendingOp holds the client's segment, device regions and process memory alive); this is a
// borrowed view of it, taken for one call and valid while that op lives. It carries only what
// staging and device reductions read, so this layer needs nothing of the session's per-client
// state.
// Depends on hc_device and hc_coll.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "common/vocabulary.h"
#include "daemon/coll/local_plan.h"
#include "daemon/device/device.h"

namespace hc::staging {

// A client's own memory, reached by cross-memory attach (session/process_memory.h implements
// it). May be called from any thread: implementations are immutable once made.
class ClientMemory {
 public:
  virtual ~ClientMemory() = default;
  // Copies bytes between the client's address space and daemon memory.
  [[nodiscard]] virtual Status read(uint64_t address, void* to, size_t bytes) const = 0;
  [[nodiscard]] virtual Status write(uint64_t address, const void* from, size_t bytes) const = 0;
};

// Where one side (send or receive) of an operand lives outside memory the daemon maps. In
// device memory: `region` is the first byte of the client's registered allocation on `device`,
// and [address, address + bytes) a range of offsets into it. In the client's own memory (no
// region): [address, address + bytes) are client addresses, reached through Operand::client.
struct OperandSide {
  device::Device* device = nullptr;  // null: not in device memory
  uint8_t* region = nullptr;
  uint64_t address = 0;
  uint64_t bytes = 0;
  bool onDevice() const { return device != nullptr; }
  // In device memory or the client's own memory (0 bytes: in mapped memory, or unused).
  bool used() const { return bytes != 0; }
};

struct Operand {
  OpType type = OpType::Barrier;
  Dtype dtype = Dtype::Int8;
  RedOp redop = RedOp::Sum;
  int root = -1;
  uint64_t count = 0;
  int rank = -1;  // the op's rank in its communicator
  // The op's buffers where the daemon maps them (send, recv, the PreMulSum scalar).
  coll::RankBuffers buffers;
  // PreMulSum with a buffer-resident scalar, read when the op runs; else null.
  const uint8_t* scalarSource = nullptr;
  OperandSide send;
  OperandSide recv;
  const ClientMemory* client = nullptr;  // set when a side is in the client's own memory
};

}  // namespace hc::staging
