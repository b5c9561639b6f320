// Session: the daemon's state for one connected client: its socket, the eventfd it rings, its
// segment and the allocator of the segment's heap, and the communicator handles it holds.
// Runs on the IPC thread only.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/ipc/protocol.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "daemon/session/device_regions.h"
#include "daemon/session/prefaulter.h"
#include "daemon/session/process_memory.h"
#include "daemon/session/segment.h"
#include "daemon/session/segment_allocator.h"

namespace hc::session {

class Communicator;

struct PeerIdentity {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// A communicator handle held by a session: which communicator, and which rank of it.
struct Member {
  std::shared_ptr<Communicator> comm;
  int rank = 0;
};

class Session {
 public:
  Session(uint32_t id, UniqueFd socket, PeerIdentity peer);

  uint32_t id() const { return id_; }
  int socketFd() const { return socket_.get(); }
  // Closes the connection now; the object may live on while a running op still refers to it.
  void closeSocket() {
    socket_.reset();
    eventFd_.reset();
  }
  int eventFd() const { return eventFd_.get(); }
  const PeerIdentity& peer() const { return peer_; }
  bool welcomed() const { return segment_ != nullptr; }
  const std::string& name() const { return name_; }
  // "client 3 (pid 1234)", for logs and error texts.
  std::string describe() const;

  // Handles one frame from the socket. A non-Ok status means the client broke the protocol: the
  // caller sends the status as an Error frame and closes the session.
  // `fds` are the descriptors that came with the frame (validateFrame checked their number).
  Status handleFrame(std::span<const uint8_t> bytes, std::span<const UniqueFd> fds,
                     uint64_t defaultSegment, uint64_t maxSegment, uint32_t ringEntries);

  // Takes the next submission into daemon memory. Corrupt rings are a protocol violation.
  ipc::PopResult popSubmission(ipc::SubmitEntry* out);
  // Posts a completion; queued when the client lets its ring fill up. Wakes the client if asleep.
  // rank and nranks describe the communicator a CommSplit made.
  void complete(uint64_t requestId, const Status& status, uint64_t value = 0, int32_t rank = 0,
                int32_t nranks = 0);
  // Moves queued completions into the ring as space frees up.
  void flushCompletions();
  bool hasParkedCompletions() const { return !overflow_.empty(); }

  SegmentPtr segment() const { return segment_; }
  // Cross-memory attach: whether the daemon's configuration lets clients ask for it, and the
  // client's memory once a CmaProbe succeeded (null otherwise).
  void allowCrossMemoryAttach(bool allowed) { cmaAllowed_ = allowed; }
  std::shared_ptr<const ProcessMemory> processMemory() const { return processMemory_; }
  const SegmentAllocator* allocator() const { return allocator_.get(); }
  // Multi-node: the Peer address this daemon answers PeerInfo with ("" without a Peer listener),
  // and the root daemons clients named for their next CommInit (CommRoot), by communicator key.
  void setPeerAddress(std::string address) { peerAddress_ = std::move(address); }
  // The root named for `key` ("" for none), forgotten once taken.
  std::string takeCommRoot(const uint8_t (&key)[16]);
  // The node's GPUs as DeviceQuery reports them, read afresh for each query (the figures change
  // as the daemon measures). Runs on the IPC thread, so it must not block; unset: no GPUs.
  using DeviceEntrySource = std::function<std::vector<ipc::DeviceEntry>()>;
  void setDeviceEntrySource(DeviceEntrySource source) { deviceEntries_ = std::move(source); }
  // The node's devices, which MemRegister imports into (borrowed; null: no device memory).
  void setDevices(const device::DeviceRegistry* devices) { devices_ = devices; }
  // devices.legacy_ipc: whether MemRegister takes legacy IPC handles.
  void allowLegacyIpc(bool allowed) { regions_.allowLegacyIpc(allowed); }
  // devices.max_imported_bytes_per_client (0: no cap), and where imports are counted
  // (borrowed; outlives every region: null means nowhere).
  void limitDeviceBytes(uint64_t maxBytes) { regions_.setMaxBytes(maxBytes); }
  void countDeviceImports(metrics::DaemonMetrics* metrics) { regions_.setMetrics(metrics); }
  // Borrowed; outlives the session. Null: allocations are pre-faulted on the calling thread.
  void setPrefaulter(Prefaulter* prefaulter) { prefaulter_ = prefaulter; }
  // The device allocation `region` of this client, or null.
  DeviceRegionPtr deviceRegion(uint32_t region) const { return regions_.find(region); }
  // Stream-ordered ops: complete() sets the DoneFlag at segment `offset` for `requestId`.
  // InvalidArgument when the flag does not lie in an allocation of the segment's heap.
  [[nodiscard]] Status trackDoneFlag(uint64_t requestId, uint64_t offset);

  uint64_t addMember(Member m);
  Member* member(uint64_t handle);
  void removeMember(uint64_t handle) { members_.erase(handle); }
  std::map<uint64_t, Member>& members() { return members_; }

  // Ops submitted and not yet completed, for back-pressure.
  uint32_t inFlight = 0;
  // Handles with a group still being submitted, and how many ops each holds so far. An open
  // group lifts back-pressure (nothing of it can complete before it closes), so together they
  // hold at most ipc::kMaxGroupOps ops: the engine fails a group that would grow beyond.
  std::map<uint64_t, uint32_t> openGroups;
  uint32_t openGroupOps = 0;
  void closeGroup(uint64_t handle) {
    auto it = openGroups.find(handle);
    if (it == openGroups.end()) return;
    openGroupOps -= it->second;
    openGroups.erase(it);
  }
  size_t parkedCompletions() const { return overflow_.size(); }

 private:
  Status onHello(std::span<const uint8_t> bytes, uint64_t defaultSegment, uint64_t maxSegment,
                 uint32_t ringEntries);
  Status onMemAlloc(std::span<const uint8_t> bytes);
  Status onMemFree(std::span<const uint8_t> bytes);
  Status onCmaProbe(std::span<const uint8_t> bytes, std::span<const UniqueFd> fds);
  Status onPeerInfo(std::span<const uint8_t> bytes);
  Status onDeviceQuery(std::span<const uint8_t> bytes);
  Status onCommArea(std::span<const uint8_t> bytes);
  Status onCommRoot(std::span<const uint8_t> bytes);
  Status onMemRegister(std::span<const uint8_t> bytes, std::span<const UniqueFd> fds);
  Status onMemUnregister(std::span<const uint8_t> bytes);
  void setDoneFlag(uint64_t requestId, const Status& status);
  Status reply(std::span<const uint8_t> frame);

  uint32_t id_;
  UniqueFd socket_;
  UniqueFd eventFd_;
  PeerIdentity peer_;
  std::string name_;
  SegmentPtr segment_;
  std::unique_ptr<SegmentAllocator> allocator_;
  std::deque<ipc::CompletionEntry> overflow_;
  std::map<uint64_t, Member> members_;
  uint64_t nextHandle_ = 1;
  bool cmaAllowed_ = false;
  std::shared_ptr<const ProcessMemory> processMemory_;
  std::string peerAddress_;
  DeviceEntrySource deviceEntries_;
  // A root named for a key, and how many CommInits of this client have yet to take it: a process
  // holding several ranks of one communicator names the root once per rank, and every frame of
  // the socket may be read before the ring's CommInits.
  struct NamedRoot {
    std::string address;
    uint32_t pending = 0;
  };
  std::map<std::array<uint8_t, 16>, NamedRoot> commRoots_;
  const device::DeviceRegistry* devices_ = nullptr;
  Prefaulter* prefaulter_ = nullptr;
  DeviceRegions regions_;
  std::map<uint64_t, uint64_t> doneFlags_;  // requestId -> segment offset of its DoneFlag
};

using SessionPtr = std::shared_ptr<Session>;

}  // namespace hc::session
