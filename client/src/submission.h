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

struct Submission {
  ipc::SubmitEntry entry{};
  std::shared_ptr<CommState> comm;
  RequestPtr request;
  // Set when a buffer is host memory outside the segment; shared by the parts of a composite.
  std::shared_ptr<Staging> staging;
  // Until prepared, the offset of a staged buffer reference is relative to the staging block.
  bool sendStaged = false;
  bool recvStaged = false;
  // Device memory: the runtime of the buffers (null for host memory), and the caller's stream
  // when the operation is stream-ordered on it (stream_ops.h).
  DeviceRuntime* runtime = nullptr;
  void* stream = nullptr;
};

// Makes the entry's buffer references final: acquires the staging block (once per staging),
// copies send data into it, and rebases the staged references onto the block.
Status prepareSubmission(Submission& sub);

}  // namespace hc::client
