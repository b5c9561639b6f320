// Submission: one operation on its way to the daemon: the entry, the request it completes, and
// the staging that mirrors its user memory. Made when the API call is made; submitted then, or
// at the outermost hc_group_end when a group is open.
#pragma once

#include <memory>

#include "client/src/request.h"
#include "common/ipc/protocol.h"

namespace hc::client {

struct CommState;
class DeviceRuntime;
class Staging;
struct RegionUses;

struct Submission {
  ipc::SubmitEntry entry{};
  std::shared_ptr<CommState> comm;
  RequestPtr request;
  // Set when a buffer is host memory outside the segment; shared by the parts of a composite.
  std::shared_ptr<Staging> staging;
  // Until prepared, the offset of a staged buffer reference is relative to the staging block.
  bool sendStaged = false;
  bool recvStaged = false;
  // The device regions the entry names (Connection::deviceRef), in use until it completes.
  std::shared_ptr<RegionUses> regionUses;
  // A stream-ordered operation (stream_ops.h): the runtime whose stream orders it, null when the
  // operation is not stream-ordered, and that stream (null: the runtime's legacy default stream).
  DeviceRuntime* runtime = nullptr;
  void* stream = nullptr;
  bool onStream() const { return runtime != nullptr; }
  // A pre-multiplied sum's scalar in device memory of scalarRuntime (PremulOp::deviceScalar),
  // scalarBytes long: copied into the op's done-flag slot on its stream before it is submitted.
  const void* deviceScalar = nullptr;
  DeviceRuntime* scalarRuntime = nullptr;
  size_t scalarBytes = 0;
};

// Makes the entry's buffer references final: acquires the staging block (once per staging),
// copies send data into it, and rebases the staged references onto the block.
Status prepareSubmission(Submission& sub);

}  // namespace hc::client
