// The small-operation area of one communicator (protocol 1.7): a sealed memfd the daemon creates
// for a communicator whose ranks all sit on it, belong to one uid and asked for it at creation
// (hc_config_t.host_small_ops). Those ranks map it and combine small collectives among
// themselves, a few cache lines each, without a round trip through the daemon.
//
// Layout: AreaHeader | AreaRankLine[nranks] | slots[depth][nranks], each an AreaSlot followed by
// slotBytes of data. Operation n of the communicator (its collective sequence, the same on every
// rank) uses slot row n % depth. Rank r:
//   1. waits until every rank's `done` >= n - depth + 1 (the row is free again),
//   2. writes its descriptor and send data into slot [n % depth][r], then stamp = n + 1 (release),
//   3. bumps `event` and wakes sleepers,
//   4. later, once every rank's stamp of row n % depth is n + 1 (acquire), checks the descriptors
//      agree, computes the result from the slots in rank order (so every rank gets bitwise the
//      same result), writes it into its receive buffer and sets done = n + 1 (release).
// `issued` counts every collective a rank issued on the communicator, so a waiting rank sees a
// peer that took operation n through the daemon instead (issued > n without a stamp for n).
//
// Everything here is shared with the ranks, so every byte is hostile to every reader: the
// daemon only writes `failed`, `reason` and `event`, and reads counters for operators; a rank
// that scribbles on the area corrupts its own communicator's results, nothing else.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace hc::ipc {

constexpr uint32_t kAreaMagic = 0x52414348;  // "HCAR"
constexpr uint32_t kAreaDepth = 8;           // rows of slots: operations in flight per rank
constexpr uint32_t kAreaSlotBytes = 4096;    // the largest contribution of one rank
constexpr int kAreaMaxRanks = 16;            // larger communicators get no area

// failed: 0 while healthy. Set once (compare-and-swap from 0) by the daemon (kAreaFailedByDaemon,
// `reason` written before) or by a rank that aborts its handle (kAreaFailedByRank + rank).
constexpr uint32_t kAreaFailedByDaemon = 1;
constexpr uint32_t kAreaFailedByRank = 0x100;

struct alignas(64) AreaHeader {
  uint32_t magic;
  uint32_t nranks;
  uint32_t depth;
  uint32_t slotBytes;
  std::atomic<uint32_t> failed;
  // Futex word: bumped (release) after every stamp, done and failure. A waiter adds itself to
  // `sleepers`, fences, rechecks, then sleeps on `event`; a publisher bumps `event`, fences and
  // wakes only when `sleepers` is non-zero.
  std::atomic<uint32_t> event;
  std::atomic<uint32_t> sleepers;
  int32_t code;      // hc::Code of the failure (kAreaFailedByDaemon), written before failed
  char reason[224];  // NUL-terminated; the last byte is never written
};
static_assert(sizeof(AreaHeader) == 256);

struct alignas(64) AreaRankLine {
  std::atomic<uint64_t> issued;  // collectives this rank issued on the communicator
  std::atomic<uint64_t> done;    // operations whose slots this rank no longer reads
  // For operators (hcctl trace): the small ops this rank issued through the area and finished
  // there; one handed over to the daemon leaves smallIssued, the daemon counts it instead.
  std::atomic<uint64_t> smallIssued;
  std::atomic<uint64_t> smallDone;
};
static_assert(sizeof(AreaRankLine) == 64);

// One rank's contribution to one operation; its data follows.
struct alignas(64) AreaSlot {
  std::atomic<uint64_t> stamp;  // operation + 1 once descriptor and data are written
  uint8_t op;                   // OpType
  uint8_t dtype;
  uint8_t redop;
  uint8_t premul;  // 1: a pre-multiplied sum; scalar holds its bytes
  int32_t root;
  uint64_t count;
  uint64_t scalar;
};
static_assert(sizeof(AreaSlot) == 64);

constexpr size_t kAreaSlotStride = sizeof(AreaSlot) + kAreaSlotBytes;

constexpr size_t areaBytes(int nranks) {
  return sizeof(AreaHeader) + sizeof(AreaRankLine) * static_cast<size_t>(nranks) +
         kAreaSlotStride * kAreaDepth * static_cast<size_t>(nranks);
}

// Typed views into a mapping of areaBytes(nranks) bytes.
struct AreaView {
  uint8_t* base = nullptr;
  int nranks = 0;

  AreaHeader* header() const { return reinterpret_cast<AreaHeader*>(base); }
  AreaRankLine* line(int rank) const {
    return reinterpret_cast<AreaRankLine*>(base + sizeof(AreaHeader)) + rank;
  }
  AreaSlot* slot(uint64_t op, int rank) const {
    const size_t row = static_cast<size_t>(op % kAreaDepth);
    return reinterpret_cast<AreaSlot*>(
        base + sizeof(AreaHeader) + sizeof(AreaRankLine) * static_cast<size_t>(nranks) +
        kAreaSlotStride * (row * static_cast<size_t>(nranks) + static_cast<size_t>(rank)));
  }
  uint8_t* data(uint64_t op, int rank) const {
    return reinterpret_cast<uint8_t*>(slot(op, rank)) + sizeof(AreaSlot);
  }
};

// Publishes a change: bumps event, then wakes sleepers (shared futex) when there are any.
void areaPublish(AreaHeader* header);

}  // namespace hc::ipc
