// RawClient: speaks the client<->daemon protocol directly (common/ipc), without libhcclient, so
// tests can send what the real client never would: malformed frames, descriptors where none
// belong, and submission entries with bad fields. Every wait is bounded, so a daemon that does not
// answer fails the test instead of hanging it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/ipc/protocol.h"
#include "common/ipc/ring.h"
#include "common/seqpacket.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace hc::integ {

constexpr auto kRawTimeout = std::chrono::seconds(5);

class RawClient {
 public:
  RawClient() = default;
  ~RawClient();
  RawClient(RawClient&& other) noexcept;
  RawClient& operator=(RawClient&&) = delete;
  RawClient(const RawClient&) = delete;

  static Result<RawClient> connect(const std::string& socketPath);

  Status send(std::span<const uint8_t> bytes, std::span<const int> fds = {});
  // The next frame, waiting at most timeout; Unavailable once the daemon closed the connection,
  // Timeout when nothing arrived.
  Result<ReceivedMessage> receive(std::chrono::milliseconds timeout = kRawTimeout);
  // True when the daemon closes the connection within timeout (frames before that are dropped).
  bool waitClosed(std::chrono::milliseconds timeout = kRawTimeout);

  // Hello -> Welcome; maps the segment. segmentBytes 0 asks for the daemon's default.
  Status handshake(uint64_t segmentBytes = 16 << 20, const std::string& name = "hc-integ-raw-client");
  const ipc::WelcomeFrame& welcome() const { return welcome_; }
  uint8_t* segment() const { return view_.base; }

  // CmaProbe -> CmaProbeReply, with the descriptors given (a client sends its /proc/self/mem).
  // The reply's status is the probe's outcome; an Error frame comes back as its status.
  Result<ipc::CmaProbeReplyFrame> cmaProbe(uint64_t address,
                                           const uint8_t (&pattern)[ipc::kCmaPatternBytes],
                                           std::span<const int> fds);

  // MemAlloc -> MemAllocReply: the allocation's offset and rounded size.
  Result<ipc::MemAllocReplyFrame> memAlloc(uint64_t bytes);

  // Pushes one entry (the request id is assigned here) and rings the daemon if it sleeps.
  Result<uint64_t> submit(ipc::SubmitEntry entry);
  // Rings the daemon's eventfd whether or not it sleeps (after writing the segment by hand).
  void ringDaemon();
  // The completion of requestId (earlier completions of other requests are dropped).
  Result<ipc::CompletionEntry> waitCompletion(uint64_t requestId,
                                              std::chrono::milliseconds timeout = kRawTimeout);
  // The completions of every request in ids, in that order (other completions are dropped).
  Result<std::vector<ipc::CompletionEntry>> waitCompletions(
      const std::vector<uint64_t>& ids, std::chrono::milliseconds timeout = kRawTimeout);
  // Submits entries as one group (kEntryGroupMore on all but the last) and waits for all of them.
  Result<std::vector<ipc::CompletionEntry>> callGroup(std::vector<ipc::SubmitEntry> entries);
  // submit + waitCompletion.
  Result<ipc::CompletionEntry> call(const ipc::SubmitEntry& entry);
  // CommInit with a random key; returns the completion (value = handle when Ok).
  Result<ipc::CompletionEntry> commInit(int32_t nranks, int32_t rank);
  // CommInit with the given key, submitted without waiting (the other ranks may be raw clients of
  // the same thread); returns the request id.
  Result<uint64_t> submitCommInit(const uint8_t* key, int32_t nranks, int32_t rank);
  // The next completion if one is there (any request).
  bool pollCompletion(ipc::CompletionEntry* out);

 private:
  UniqueFd socket_;
  UniqueFd segmentFd_;
  UniqueFd daemonEventFd_;
  ipc::WelcomeFrame welcome_{};
  ipc::SegmentView view_;
  uint32_t nextFrameId_ = 1;
  uint64_t nextRequestId_ = 1;
};

// A random communicator key.
void randomKey(uint8_t* key);

// An entry for op on comm with both buffers at the given offsets (kNoBuffer when absent).
ipc::SubmitEntry makeEntry(ipc::OpType op, uint64_t comm, uint8_t dtype, uint8_t redop,
                           uint64_t count, uint64_t sendOffset, uint64_t recvOffset,
                           int32_t root = -1);

// The completion's error text, bounded even when the daemon forgot the terminating NUL.
std::string completionText(const ipc::CompletionEntry& c);

// A fresh raw client runs a one-rank int32 sum allreduce and checks the result: proof that the
// daemon still serves clients. Returns what went wrong.
Status checkDaemonServes(const std::string& socketPath);

}  // namespace hc::integ
