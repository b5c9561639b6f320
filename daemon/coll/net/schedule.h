// Schedule: one node's part of an inter-node algorithm, as a list of steps the ScheduleRunner
// executes chunk by chunk. Each algorithm file (allreduce_ring.cc, broadcast_chain.cc, ...)
// builds one from a validated NetOpSpec; the runner owns posting, windows, failures and cleanup,
// so an algorithm is only "who sends what to whom, and what happens on arrival".
//
// Chunks. A step's send region and receive region are each cut into chunks of chunkBytes (the
// last one shorter); a region of 0 bytes is one empty message, so every step that names a peer
// exchanges at least one message with it (a barrier is made of such steps). The two ends of a
// link cut equal regions, so they agree on every message.
//
// Ordering and dependencies, all the runner needs to pipeline safely:
// - sends are posted in (step, chunk) order, and so are receives;
// - with sendsPreviousResult, chunk k of step s is sent only after chunk k of step s-1 has been
//   received and applied (its send region is what that receive produced; the regions have the
//   same size);
// - a receive of step s never writes bytes that a send of step s or earlier has yet to read: a
//   Direct receive is posted, and a Combine is applied, only once every overlapping send of
//   those steps has been posted and is final. Sends of later steps are the ones meant to read
//   what the receive writes (through sendsPreviousResult).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hc::coll::net {

// What happens to a chunk when it arrives.
enum class Landing : uint8_t {
  Direct,   // received in place: the bytes already are the final value (broadcast, allgather)
  Combine,  // received into a scratch slot, then reduced into the region with what is there
};

struct Step {
  // Sends: the bytes [sendData, sendData + sendBytes) go to node sendTo, chunk by chunk.
  int sendTo = -1;  // node number; -1: this step sends nothing
  const uint8_t* sendData = nullptr;
  size_t sendBytes = 0;
  bool sendsPreviousResult = false;  // see "dependencies" above

  // Receives: node recvFrom's message lands in [recvData, recvData + recvBytes).
  int recvFrom = -1;  // node number; -1: this step receives nothing
  uint8_t* recvData = nullptr;
  size_t recvBytes = 0;
  Landing landing = Landing::Direct;
  // Combine: the received operand goes first (reduceRange inputs {received, local}). Partners
  // that both compute one value pass the lower node's data first, so they get the same bits even
  // where the operator is not commutative in the bits (NaN payloads, max(-0, +0)).
  bool receivedFirst = false;
  bool finalizes = false;  // Combine: the last reduction of these elements: divide for Avg
};

// A byte copy done once at start(), before any message (all-to-all's own block).
struct LocalCopy {
  const uint8_t* from = nullptr;
  uint8_t* to = nullptr;
  size_t bytes = 0;
};

struct Schedule {
  const char* algorithm = "";  // "allreduce_ring", ...
  std::vector<Step> steps;
  std::vector<LocalCopy> localCopies;
  // A reduction with nobody to combine with (a single node) still divides for Avg: these bytes
  // are finalized in place at start().
  uint8_t* finalizeAtStart = nullptr;
  size_t finalizeBytes = 0;
};

}  // namespace hc::coll::net
