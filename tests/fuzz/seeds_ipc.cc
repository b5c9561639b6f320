// Seeds of the frames and submit targets: a connection per frame kind, and an entry per
// operation the engine resolves. Each is replayed through a fresh FuzzSession (or the submit
// fixture) and must be accepted there.
#include <cstring>
#include <utility>

#include "common/ipc/frames.h"
#include "daemon/session/validate.h"
#include "tests/fuzz/fuzz_inputs.h"
#include "tests/fuzz/seeds.h"
#include "tests/fuzz/session_fixture.h"

namespace hc::fuzz {
namespace {

using ipc::FrameType;

struct Frame {
  std::vector<uint8_t> bytes;
  size_t fds = 0;
};

template <typename T>
Frame frame(const T& f, size_t fds = 0) {
  auto b = ipc::frameBytes(f);
  return {{b.begin(), b.end()}, fds};
}

template <typename T>
T make(FrameType type) {
  return ipc::makeFrame<T>(type, 7);
}

Frame hello() {
  auto h = make<ipc::HelloFrame>(FrameType::Hello);
  h.minor = ipc::kProtocolMinor;
  h.pid = 4242;
  ipc::copyText(h.clientName, "trainer-0");
  return frame(h);
}

// Requests: Hello, then the frame; the daemon must handle every one without closing. Replies
// (daemon -> client): Hello, then the frame; it must pass validateFrame, and the daemon refuses
// it as "not a request".
void addFrames(std::vector<Seed>* seeds, const std::string& name, std::vector<Frame> frames,
               bool lastIsReply) {
  Seed seed{"frames", name, {}};
  for (const Frame& f : frames) appendFrameRecord(&seed.bytes, f.bytes, f.fds);
  FuzzSession session;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (lastIsReply && i + 1 == frames.size()) {
      auto type = ipc::validateFrame(frames[i].bytes, frames[i].fds);
      requireValid(type.isOk(), seed, type.status().message());
    } else {
      Status s = session.frame(frames[i].bytes, frames[i].fds);
      requireValid(s.isOk(), seed, "frame " + std::to_string(i) + ": " + s.message());
    }
  }
  seeds->push_back(std::move(seed));
}

void frameSeeds(std::vector<Seed>* seeds) {
  // The first heap allocation of a fresh session: what MemFree and the replies name.
  FuzzSession probe;
  if (!probe.hello().isOk()) requireValid(false, {"frames", "-", {}}, "Hello refused");
  const uint64_t offset = probe.alloc(4096);

  addFrames(seeds, "hello", {hello()}, false);
  auto alloc = make<ipc::MemAllocFrame>(FrameType::MemAlloc);
  alloc.bytes = 4096;
  addFrames(seeds, "mem_alloc", {hello(), frame(alloc)}, false);
  auto free = make<ipc::MemFreeFrame>(FrameType::MemFree);
  free.offset = offset;
  addFrames(seeds, "mem_free", {hello(), frame(alloc), frame(free)}, false);
  auto abort = make<ipc::CommAbortFrame>(FrameType::CommAbort);
  abort.commHandle = 1;
  addFrames(seeds, "comm_abort", {hello(), frame(abort)}, false);
  auto cma = make<ipc::CmaProbeFrame>(FrameType::CmaProbe);
  cma.address = 0x7f0000001000;
  for (size_t i = 0; i < ipc::kCmaPatternBytes; ++i) cma.pattern[i] = uint8_t(i * 7 + 1);
  addFrames(seeds, "cma_probe", {hello(), frame(cma, ipc::frameFdCount(FrameType::CmaProbe))},
            false);
  addFrames(seeds, "peer_info", {hello(), frame(make<ipc::PeerInfoFrame>(FrameType::PeerInfo))},
            false);
  auto root = make<ipc::CommRootFrame>(FrameType::CommRoot);
  for (size_t i = 0; i < sizeof(root.key); ++i) root.key[i] = uint8_t(0xa0 + i);
  ipc::copyText(root.address, "10.0.0.1:7710");
  addFrames(seeds, "comm_root", {hello(), frame(root)}, false);
  auto reg = make<ipc::MemRegisterFrame>(FrameType::MemRegister);
  reg.memoryType = static_cast<uint8_t>(ipc::DeviceMemory::Sim);
  reg.vendor = static_cast<uint8_t>(ipc::DeviceVendor::Nvidia);
  reg.flags = ipc::kMemRegisterPciAddress;
  reg.pciAddress = ipc::packPciAddress(0, 0x3b, 0, 0);
  reg.allocationId = 9;
  reg.bytes = 1 << 20;
  reg.handleKind = static_cast<uint32_t>(ipc::HandleKind::LegacyIpc);
  addFrames(seeds, "mem_register_legacy", {hello(), frame(reg)}, false);
  reg.handleKind = static_cast<uint32_t>(ipc::HandleKind::Fd);
  addFrames(seeds, "mem_register_fd", {hello(), frame(reg, 1)}, false);
  auto query = make<ipc::DeviceQueryFrame>(FrameType::DeviceQuery);
  query.index = 1;
  addFrames(seeds, "device_query", {hello(), frame(query)}, false);
  auto unreg = make<ipc::MemUnregisterFrame>(FrameType::MemUnregister);
  unreg.region = 1;
  addFrames(seeds, "mem_unregister", {hello(), frame(unreg)}, false);
  auto area = make<ipc::CommAreaFrame>(FrameType::CommArea);
  area.commHandle = 1;  // a handle the client does not hold
  addFrames(seeds, "comm_area", {hello(), frame(area)}, false);

  auto welcome = make<ipc::WelcomeFrame>(FrameType::Welcome);
  welcome.minor = ipc::kProtocolMinor;
  welcome.ringEntries = kRingEntries;
  addFrames(seeds, "welcome", {hello(), frame(welcome, 2)}, true);
  addFrames(seeds, "error", {hello(), frame(ipc::makeErrorFrame(7, invalidArgument("bad")))}, true);
  auto allocReply = make<ipc::MemAllocReplyFrame>(FrameType::MemAllocReply);
  allocReply.offset = offset;
  allocReply.bytes = 4096;
  addFrames(seeds, "mem_alloc_reply", {hello(), frame(allocReply)}, true);
  addFrames(seeds, "mem_free_reply",
            {hello(), frame(make<ipc::MemFreeReplyFrame>(FrameType::MemFreeReply))}, true);
  auto cmaReply = make<ipc::CmaProbeReplyFrame>(FrameType::CmaProbeReply);
  ipc::copyText(cmaReply.message, "cross-memory attach is off");
  addFrames(seeds, "cma_probe_reply", {hello(), frame(cmaReply)}, true);
  auto infoReply = make<ipc::PeerInfoReplyFrame>(FrameType::PeerInfoReply);
  ipc::copyText(infoReply.address, "10.0.0.2:7710");
  addFrames(seeds, "peer_info_reply", {hello(), frame(infoReply)}, true);
  addFrames(seeds, "comm_root_reply",
            {hello(), frame(make<ipc::CommRootReplyFrame>(FrameType::CommRootReply))}, true);
  auto regReply = make<ipc::MemRegisterReplyFrame>(FrameType::MemRegisterReply);
  regReply.region = 1;
  addFrames(seeds, "mem_register_reply", {hello(), frame(regReply)}, true);
  auto queryReply = make<ipc::DeviceQueryReplyFrame>(FrameType::DeviceQueryReply);
  queryReply.total = 2;
  queryReply.index = 1;
  ipc::copyText(queryReply.device.id, "sim-amd:0");
  ipc::copyText(queryReply.device.vendor, "amd");
  ipc::copyText(queryReply.device.backend, "sim");
  queryReply.device.memoryBytes = 16ull << 30;
  queryReply.device.numaNode = -1;
  queryReply.device.flags = ipc::kDeviceMeasured;
  queryReply.device.weight = 0.5;
  queryReply.device.rateGBps = 3.3;
  addFrames(seeds, "device_query_reply", {hello(), frame(queryReply)}, true);
  addFrames(seeds, "mem_unregister_reply",
            {hello(), frame(make<ipc::MemUnregisterReplyFrame>(FrameType::MemUnregisterReply))},
            true);
  auto areaReply = make<ipc::CommAreaReplyFrame>(FrameType::CommAreaReply);
  areaReply.nranks = 2;
  addFrames(seeds, "comm_area_reply", {hello(), frame(areaReply)}, true);
}

void addEntry(std::vector<Seed>* seeds, const std::string& name, const ipc::SubmitEntry& e,
              int nranks, int rank) {
  Seed seed{"submit", name, writeSubmitInput(e, nranks, rank)};
  const auto& session = submitFixture().session.session();
  // As submit_fuzz.cc takes them: a shrink's exclude list is read, a revoke carries nothing.
  Status valid;
  if (e.op == static_cast<uint8_t>(ipc::OpType::CommShrink)) {
    valid = session::readExcludeList(e, *session, nranks, rank).status();
  } else if (e.op != static_cast<uint8_t>(ipc::OpType::CommRevoke)) {
    valid = session::resolveOp(e, session, rank, nranks).status();
  }
  requireValid(valid.isOk(), seed, valid.message());
  seeds->push_back(std::move(seed));
}

void submitSeeds(std::vector<Seed>* seeds) {
  using ipc::OpType;
  const SubmitFixture& f = submitFixture();
  constexpr int kRanks = 4;
  constexpr int kRank = 1;
  constexpr uint64_t kCount = 16;  // float32 elements: 64 bytes per rank
  auto entry = [&](OpType type, uint64_t send, uint64_t recv) {
    ipc::SubmitEntry e{};
    e.requestId = 11;
    e.commHandle = 1;
    e.op = static_cast<uint8_t>(type);
    e.dtype = 7;  // float32
    e.redop = static_cast<uint8_t>(ipc::RedOp::Sum);
    e.root = 0;
    e.count = kCount;
    e.send = {send, static_cast<uint8_t>(ipc::MemKind::Segment), {}, 0};
    e.recv = {recv, static_cast<uint8_t>(ipc::MemKind::Segment), {}, 0};
    return e;
  };
  addEntry(seeds, "allreduce", entry(OpType::AllReduce, f.a, f.b), kRanks, kRank);
  addEntry(seeds, "allreduce_in_place", entry(OpType::AllReduce, f.a, f.a), kRanks, kRank);
  addEntry(seeds, "broadcast", entry(OpType::Broadcast, f.a, f.b), kRanks, kRank);
  auto reduce = entry(OpType::Reduce, f.a, f.b);
  reduce.redop = static_cast<uint8_t>(ipc::RedOp::Max);
  addEntry(seeds, "reduce", reduce, kRanks, 0);
  addEntry(seeds, "allgather", entry(OpType::AllGather, f.a, f.b), kRanks, kRank);
  addEntry(seeds, "allgather_in_place", entry(OpType::AllGather, f.a + kRank * kCount * 4, f.a),
           kRanks, kRank);
  addEntry(seeds, "reduce_scatter", entry(OpType::ReduceScatter, f.a, f.b), kRanks, kRank);
  auto barrier = entry(OpType::Barrier, ipc::kNoBuffer, ipc::kNoBuffer);
  barrier.count = 0;
  barrier.root = -1;
  addEntry(seeds, "barrier", barrier, kRanks, kRank);
  addEntry(seeds, "alltoall", entry(OpType::AllToAll, f.a, f.b), kRanks, kRank);
  addEntry(seeds, "gather", entry(OpType::Gather, f.a, f.b), kRanks, 0);
  addEntry(seeds, "scatter", entry(OpType::Scatter, f.a, f.b), kRanks, 0);
  auto send = entry(OpType::Send, f.a, ipc::kNoBuffer);
  send.root = 2;
  addEntry(seeds, "send", send, kRanks, kRank);
  auto recv = entry(OpType::Recv, ipc::kNoBuffer, f.b);
  recv.root = 2;
  addEntry(seeds, "recv", recv, kRanks, kRank);
  auto split = entry(OpType::CommSplit, ipc::kNoBuffer, ipc::kNoBuffer);
  split.count = 0;
  split.splitColor = 3;
  split.splitKey = 1;
  addEntry(seeds, "comm_split", split, kRanks, kRank);
  // Shrink without rank 0 (the list is the buffer's first 4 bytes), and a revoke.
  auto shrink = entry(OpType::CommShrink, f.a, ipc::kNoBuffer);
  shrink.count = 1;
  shrink.shrinkFlags = ipc::kShrinkAbort;
  addEntry(seeds, "comm_shrink", shrink, kRanks, kRank);
  addEntry(seeds, "comm_revoke", entry(OpType::CommRevoke, ipc::kNoBuffer, ipc::kNoBuffer), kRanks,
           kRank);
  // A pre-multiplied sum whose scalar is read from the segment when the operation runs.
  auto premul = entry(OpType::AllReduce, f.a, f.b);
  premul.redop = static_cast<uint8_t>(ipc::RedOp::PreMulSum);
  premul.flags = ipc::kEntryScalarInBuffer | ipc::kEntryGroupMore;
  premul.scalar = f.b + kSubmitBufferBytes - 4;
  addEntry(seeds, "allreduce_premulsum_scalar_in_buffer", premul, kRanks, kRank);
}

}  // namespace

std::vector<Seed> ipcSeeds() {
  std::vector<Seed> seeds;
  frameSeeds(&seeds);
  submitSeeds(&seeds);
  return seeds;
}

}  // namespace hc::fuzz
