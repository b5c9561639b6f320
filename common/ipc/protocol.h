// The client<->daemon protocol: fixed-layout frames on the Unix socket and the shared segment
// (rings, signal words, heap). Both sides compile this one header; every struct is standard
// layout with explicit widths, so the layout is the contract. Depends on common/ only.
//
// Connection: the client connects to the SOCK_SEQPACKET socket and sends Hello. The daemon checks
// the peer's credentials and protocol version and answers Welcome with two descriptors (the
// sealed memfd segment, the daemon's eventfd for this client) or Error and closes.
//
// Segment: [SegmentHeader][submission ring][completion ring][heap]. The client writes submission
// entries and its host buffers; the daemon writes completion entries and the result data. The
// daemon reads every submission entry exactly once into its own memory and validates it there:
// nothing in the segment is trusted, and the heap allocator's state lives in the daemon only.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/vocabulary.h"

namespace hc::ipc {

constexpr uint32_t kFrameMagic = 0x50494348;  // "HCIP" little-endian
constexpr uint16_t kProtocolMajor = 1;        // a different major is refused at Hello
// 1: p2p, groups, all-to-all, gather/scatter, split, CmaProbe. 2: PeerInfo, CommRoot (multi-node).
// 3: device memory (MemRegister, MemKind::Device, done flags). 4: CmaProbe carries the client's
// /proc/self/mem (one fd), and a probe without it is refused (see CmaProbeFrame).
// 5: DeviceQuery (the node's GPUs and their measured speed weights, for hc_get_devices).
// 6: CommShrink and CommRevoke entries. 7: kEntrySmallOps and CommArea (small_area.h).
constexpr uint16_t kProtocolMinor = 7;
// The first minor whose CmaProbe carries the fd: a client asks an older daemon for nothing.
constexpr uint16_t kCmaProbeFdMinor = 4;
// The first minor that answers DeviceQuery: an older daemon would close on the unknown type.
constexpr uint16_t kDeviceQueryMinor = 5;
// The first minor that takes CommShrink and CommRevoke entries.
constexpr uint16_t kShrinkMinor = 6;
// The first minor with kEntrySmallOps and CommArea frames (small_area.h).
constexpr uint16_t kSmallAreaMinor = 7;
constexpr size_t kMaxFrameBytes = 1024;  // larger frames are rejected, never truncated
constexpr size_t kMessageBytes = 200;    // error text carried in Error frames
constexpr size_t kCompletionText = 100;  // error text carried in completion entries

enum class FrameType : uint16_t {
  Hello = 1,              // client -> daemon, first frame
  Welcome = 2,            // daemon -> client, + fds [segment memfd, daemon eventfd]
  Error = 3,              // daemon -> client: the request failed (or the connection is refused)
  MemAlloc = 4,           // client -> daemon: allocate from the client's segment heap
  MemAllocReply = 5,      // daemon -> client
  MemFree = 6,            // client -> daemon
  MemFreeReply = 7,       // daemon -> client
  CommAbort = 8,          // client -> daemon: abort one communicator handle, no reply
  CmaProbe = 9,           // client -> daemon: ask to use cross-memory attach, + fd [/proc/self/mem]
  CmaProbeReply = 10,     // daemon -> client
  PeerInfo = 11,          // client -> daemon: this daemon's Peer address, for hc_get_unique_id
  PeerInfoReply = 12,     // daemon -> client
  CommRoot = 13,          // client -> daemon: the root daemon of a communicator key (CommRootFrame)
  CommRootReply = 14,     // daemon -> client
  MemRegister = 15,       // client -> daemon: map a device allocation (MemRegisterFrame [+ fd])
  MemRegisterReply = 16,  // daemon -> client: its region id
  MemUnregister = 17,     // client -> daemon: unmap a region
  MemUnregisterReply = 18,
  DeviceQuery = 19,       // client -> daemon: one of the node's GPUs, by index (DeviceQueryFrame)
  DeviceQueryReply = 20,  // daemon -> client: how many there are, and that one
  CommArea = 21,          // client -> daemon: the small-operation area of a handle (1.7)
  CommAreaReply = 22,     // daemon -> client: whether there is one [+ fd: its sealed memfd]
};

struct FrameHeader {
  uint32_t magic;      // kFrameMagic
  uint16_t major;      // kProtocolMajor of the sender
  uint16_t type;       // FrameType
  uint32_t length;     // bytes of the whole frame, header included; must equal the type's size
  uint32_t requestId;  // echoed in the reply
};

struct HelloFrame {
  FrameHeader header;
  uint16_t minor;
  uint16_t reserved;
  uint32_t pid;
  uint64_t segmentBytes;  // requested; 0 = the daemon's default; capped by the daemon's maximum
  char clientName[64];    // NUL-terminated, for logs
};

struct WelcomeFrame {
  FrameHeader header;
  uint16_t minor;
  uint16_t reserved;
  uint32_t clientId;
  uint64_t segmentBytes;
  uint32_t ringEntries;  // power of two, both rings
  uint32_t daemonPid;
  uint64_t submitOffset;      // submission ring entries start here
  uint64_t completionOffset;  // completion ring entries start here
  uint64_t heapOffset;
  uint64_t heapBytes;
};

struct ErrorFrame {
  FrameHeader header;
  int32_t status;  // hc::Code
  uint32_t reserved;
  char message[kMessageBytes];  // NUL-terminated
};

struct MemAllocFrame {
  FrameHeader header;
  uint64_t bytes;
};

struct MemAllocReplyFrame {
  FrameHeader header;
  uint64_t offset;  // from the segment start
  uint64_t bytes;   // rounded up to the allocation granularity
};

struct MemFreeFrame {
  FrameHeader header;
  uint64_t offset;
};

struct MemFreeReplyFrame {
  FrameHeader header;
};

struct CommAbortFrame {
  FrameHeader header;
  uint64_t commHandle;
};

// Cross-memory attach: the client's own memory read and written by the daemon, instead of the
// client copying it through its segment. The frame carries one descriptor: the client's
// /proc/self/mem, opened O_RDWR by the client itself, so the kernel checked the access as the
// client and the daemon needs no ptrace rights. The daemon reads and writes with pread/pwrite
// on it, never by pid: the file reaches the address space it was opened on and nothing else, so
// after the client exits or calls exec (a setuid program, say, while a child keeps the socket)
// every access fails instead of reaching the new image. The client puts `pattern` (random) at
// `address` in its memory; the daemon checks that the descriptor is a mem file of /proc, reads
// the pattern back through it and writes the bitwise complement, which the client checks after
// the reply. Ok enables MemKind::ProcessMemory for the rest of the connection; otherwise the
// reply says why (disabled by configuration, not a mem file, pattern differs) and the client
// keeps copying through the segment.
//
// Before minor 4 the probe carried no descriptor and the daemon used process_vm_readv/writev on
// the client's pid. A daemon of minor 4 refuses a probe without exactly one descriptor (Error,
// then it closes the connection: an older client then connects again without the probe), and a
// client of minor 4 does not probe a daemon that announced an older minor.
constexpr size_t kCmaPatternBytes = 64;
struct CmaProbeFrame {
  FrameHeader header;
  uint64_t address;
  uint8_t pattern[kCmaPatternBytes];
};

struct CmaProbeReplyFrame {
  FrameHeader header;
  int32_t status;  // hc::Code
  uint32_t reserved;
  char message[kMessageBytes];  // why it is unavailable; NUL-terminated
};

// Multi-node communicators. A unique id names the root daemon's Peer address ("host:port", at
// most kPeerAddressBytes - 1 characters). hc_get_unique_id asks its daemon for that address
// (PeerInfo; empty when the daemon has no Peer listener, and then the id names no root and the
// communicator is formed among one daemon's clients). Before submitting CommInit with a key whose
// id names a root, the client tells its daemon that root (CommRoot); the daemon uses it for the
// next CommInit of that key from this client.
constexpr size_t kPeerAddressBytes = 104;

struct PeerInfoFrame {
  FrameHeader header;
};

struct PeerInfoReplyFrame {
  FrameHeader header;
  char address[kPeerAddressBytes];  // NUL-terminated; "" when the daemon has no Peer listener
};

struct CommRootFrame {
  FrameHeader header;
  uint8_t key[16];
  char address[kPeerAddressBytes];  // NUL-terminated
};

struct CommRootReplyFrame {
  FrameHeader header;
};

// Device memory. The client registers each device allocation once (by the runtime's allocation
// id, never by address: allocators reuse addresses) and names its buffers by (region, offset).
// The daemon treats every handle as untrusted: it checks the kind against the device, the size
// against what the mapping really has (fstat and seals for fds), and binds the region to this
// client: a region id means nothing on another connection.
enum class DeviceMemory : uint8_t { Sim = 1, Cuda = 2, Hip = 3 };
enum class DeviceVendor : uint8_t { Nvidia = 1, Amd = 2 };
enum class HandleKind : uint32_t {
  LegacyIpc = 0,  // handle[] holds a cudaIpcMemHandle_t / hipIpcMemHandle_t
  Fd = 1,         // an fd came with the frame (SCM_RIGHTS): a sealed memfd (sim) or a VMM POSIX fd
};
constexpr size_t kDeviceHandleBytes = 64;

// Which device a MemRegister names. `device` is the client runtime's ordinal, which agrees with
// the daemon's only when both see the same GPUs in the same order: CUDA_VISIBLE_DEVICES,
// HIP_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES set differently for the two processes renumber
// them. The PCI address does not change with those variables, so a client that knows it sets
// kMemRegisterPciAddress and the daemon picks the device of that vendor at `pciAddress`, whatever
// the ordinal says.
//
// Compatibility: the two fields were `reserved` and `reserved2`, which clients before them send
// as zeros. A clear flag means "no address": the daemon falls back to the ordinal, as it always
// did; a daemon before them ignores both fields and uses the ordinal. So neither side needs a
// newer protocol minor. A flag this side does not know fails validation (frames.cc): it could
// change what the frame means.
constexpr uint16_t kMemRegisterPciAddress = 1u << 0;
constexpr uint16_t kKnownMemRegisterFlags = kMemRegisterPciAddress;

// A PCI address in 32 bits: domain (16) << 16 | bus (8) << 8 | device (5) << 3 | function (3),
// "0000:3b:00.0" being 0x00003b00. Wider fields are truncated to their width.
constexpr uint32_t packPciAddress(uint32_t domain, uint32_t bus, uint32_t device,
                                  uint32_t function) {
  return (domain & 0xffffu) << 16 | (bus & 0xffu) << 8 | (device & 0x1fu) << 3 | (function & 0x7u);
}
constexpr uint32_t pciDomain(uint32_t address) { return address >> 16; }
constexpr uint32_t pciBus(uint32_t address) { return (address >> 8) & 0xffu; }
constexpr uint32_t pciDevice(uint32_t address) { return (address >> 3) & 0x1fu; }
constexpr uint32_t pciFunction(uint32_t address) { return address & 0x7u; }

struct MemRegisterFrame {
  FrameHeader header;
  uint8_t memoryType;     // DeviceMemory
  uint8_t vendor;         // DeviceVendor
  uint16_t flags;         // kMemRegister* bits
  int32_t device;         // the client runtime's ordinal of the device within its vendor
  uint64_t allocationId;  // the client runtime's id of the allocation (logs, diagnostics)
  uint64_t bytes;         // size of the allocation
  uint32_t handleKind;    // HandleKind
  uint32_t pciAddress;    // packPciAddress() of the device when flags has kMemRegisterPciAddress
  uint8_t handle[kDeviceHandleBytes];
};
static_assert(sizeof(MemRegisterFrame) == 112 && std::is_standard_layout_v<MemRegisterFrame>);

struct MemRegisterReplyFrame {
  FrameHeader header;
  uint32_t region;  // never 0
  uint32_t reserved;
};

struct MemUnregisterFrame {
  FrameHeader header;
  uint32_t region;
  uint32_t reserved;
};

struct MemUnregisterReplyFrame {
  FrameHeader header;
};

// The node's GPUs as the daemon found them at start, with the speed weight it measures in the
// background (a rate relative to the node's fastest measured GPU). One device per reply keeps
// every frame far under kMaxFrameBytes whatever the node holds: the client asks index 0, learns
// `total`, and asks the rest. The list does not change while the daemon runs; the measured
// figures may between two queries. Index 0 is always answered (with total 0 and a zeroed entry
// on a node without GPUs); any other index at or past `total` is answered with Error
// (InvalidArgument). Every text field is NUL-terminated and every figure finite and not negative
// (frames.cc refuses a reply otherwise).
constexpr uint32_t kDeviceMeasured = 1u << 0;  // DeviceEntry::flags: the figures were measured
constexpr uint32_t kMaxDeviceEntries = 4096;   // a reply announcing more is refused

struct DeviceEntry {
  char id[32];           // "nvidia:0", "sim-amd:1", "pci-intel:0"
  char vendor[16];       // "nvidia", "amd", "intel", ...
  char backend[16];      // "cuda", "hip", "sim", "none" (found on the bus, no runtime drives it)
  char model[96];        // "" when unknown
  char pciBusId[16];     // "0000:3b:00.0"; "" for a simulated device
  uint64_t memoryBytes;  // 0 when unknown
  int32_t numaNode;      // -1 when unknown
  uint32_t flags;        // kDevice* bits; a reader ignores bits it does not know
  double weight;         // 1.0 = the node's fastest measured GPU; 0 = not measured (see note)
  double h2dGBps;        // host-to-device staging copy, GB/s; 0 = not measured
  double d2hGBps;        // device-to-host staging copy
  double reduceGBps;     // the device's sum reduction kernel
  double rateGBps;       // the staging + kernel rate the weight is relative to
  char note[96];         // why it was not measured, or a remark on the figures; may be ""
};
static_assert(sizeof(DeviceEntry) == 328 && std::is_standard_layout_v<DeviceEntry>);

struct DeviceQueryFrame {
  FrameHeader header;
  uint32_t index;  // 0 .. total - 1
  uint32_t reserved;
};

struct DeviceQueryReplyFrame {
  FrameHeader header;
  uint32_t total;  // GPUs on the node; 0 means none (then `device` is all zeros)
  uint32_t index;  // echoes the query's
  DeviceEntry device;
};
static_assert(sizeof(DeviceQueryReplyFrame) == 352);

// The small-operation area of a communicator handle (small_area.h). The reply comes with the
// area's memfd when present is 1, with none when the communicator has no area.
struct CommAreaFrame {
  FrameHeader header;
  uint64_t commHandle;
};

struct CommAreaReplyFrame {
  FrameHeader header;
  uint32_t present;  // 0 or 1
  int32_t rank;      // the handle's rank: its row in the area
  uint32_t nranks;
  uint32_t reserved;
  uint64_t bytes;  // areaBytes(nranks)
};

// ---- the shared segment ------------------------------------------------------------------

constexpr uint32_t kSegmentMagic = 0x47455348;  // "HSEG"
constexpr uint64_t kNoBuffer = ~0ull;           // an absent buffer reference
constexpr size_t kHeapAlignment = 4096;         // every heap allocation is page aligned

// Operation codes (SubmitEntry::op), dtypes and reduction operators: common/vocabulary.h.
using hc::kNumOpTypes;
using hc::kNumRedOps;
using hc::OpType;
using hc::RedOp;

// SubmitEntry::flags.
// GroupMore: another entry of the same group on the same communicator follows. Entries up to and
// including the first one without it form one unit, matched as a whole (GroupStart/GroupEnd):
// the unit's operations may complete in any order, and the unit completes when all of them have.
// A group spanning communicators closes one unit per communicator.
constexpr uint8_t kEntryGroupMore = 1u << 0;
// ScalarInBuffer (PreMulSum): `scalar` is the segment offset of the scalar (dtype bytes), read
// when the operation runs, as NCCL reads a device-resident scalar; otherwise it is the value.
constexpr uint8_t kEntryScalarInBuffer = 1u << 1;
// SmallOps (CommInit, 1.7): this rank asks for the communicator's small-operation area and
// promises that its small collectives on it use host memory and no stream (small_area.h). The
// daemon makes the area only when every rank asked, all sit on it and share one uid.
constexpr uint8_t kEntrySmallOps = 1u << 2;
constexpr uint8_t kKnownEntryFlags = kEntryGroupMore | kEntryScalarInBuffer | kEntrySmallOps;
constexpr uint32_t kMaxGroupOps = 1u << 16;  // a longer group fails with InvalidArgument

// Memory kinds of a buffer reference.
enum class MemKind : uint8_t {
  Segment = 0,        // offset into this client's segment
  ProcessMemory = 1,  // offset = an address in the client's own memory (after a CmaProbe)
  Device = 2,         // offset into the registered device allocation BufferRef::region
};

struct BufferRef {
  uint64_t offset;  // kNoBuffer when absent
  uint8_t kind;     // MemKind
  uint8_t reserved[3];
  uint32_t region;  // MemKind::Device: the MemRegisterReply's region; else 0
};

// One submission: 128 bytes, written by the client, read once by the daemon.
struct SubmitEntry {
  uint64_t requestId;   // echoed in the completion
  uint64_t commHandle;  // from the CommInit completion; 0 for CommInit itself
  uint8_t op;           // OpType
  uint8_t dtype;        // Dtype (the hc_dtype_t / ncclDataType_t value)
  uint8_t redop;        // RedOp
  uint8_t flags;        // kEntry* bits
  int32_t root;         // broadcast/reduce/gather/scatter root; send/recv peer; -1 otherwise
  uint64_t count;       // elements (allgather: per rank sent; reduce-scatter: per rank received)
  BufferRef send;
  BufferRef recv;
  uint64_t scalar;  // PreMulSum: the scalar's bytes in dtype, little-endian, zero-padded
  // CommInit only:
  uint8_t key[16];  // communicator key from the unique id
  int32_t nranks;
  int32_t rank;
  int32_t timeoutMs;     // init (and shrink) deadline; ops wait without limit when <= 0
  uint32_t shrinkFlags;  // CommShrink only: kShrink* bits
  // CommSplit only: the new communicator's color (kSplitNoColor: none) and ordering key.
  int32_t splitColor;
  int32_t splitKey;
  // Segment offset of a DoneFlag the daemon sets when this entry completes (stream-ordered
  // device operations), or 0 for none (offset 0 is the segment header, never a flag).
  uint64_t doneFlag;
  uint64_t reserved2;
};
static_assert(sizeof(SubmitEntry) == 128 && std::is_standard_layout_v<SubmitEntry>);

constexpr int32_t kSplitNoColor = -1;  // HC_SPLIT_NOCOLOR

// CommShrink: `send` is a segment buffer of `count` int32 ranks of the parent to leave out (every
// survivor names the same ones, in any order), timeoutMs bounds the forming of the child.
// kShrinkAbort first stops the parent's outstanding operations (NCCL_SHRINK_ABORT); without it
// the parent must be idle on this rank (NCCL_SHRINK_DEFAULT).
constexpr uint32_t kShrinkAbort = 1u << 0;
constexpr uint32_t kKnownShrinkFlags = kShrinkAbort;

// Every submission entry gets exactly one completion, also after CommAbort or a failure. A client
// may have more entries outstanding than the completion ring holds (a large group): the daemon
// parks completions that do not fit, and a client that pops completions while more are still
// owed than the ring holds rings the daemon's eventfd, so the daemon wakes to move them in.
//
// CommInit: value = the communicator handle. CommSplit: value = the new handle (0 for a rank
// with no color), rank = the caller's rank in it, nranks = its size. CommShrink: value = the
// child's handle (rank and nranks as the survivors' order gives them). CommRevoke: completes
// once the parent's operations on this daemon have stopped.
struct CompletionEntry {
  uint64_t requestId;
  int32_t status;  // hc::Code
  int32_t rank;
  uint64_t value;
  int32_t nranks;
  char message[kCompletionText];  // NUL-terminated error text when status != Ok
};
static_assert(sizeof(CompletionEntry) == 128 && std::is_standard_layout_v<CompletionEntry>);

// The "done" flag of a stream-ordered operation: the caller's stream waits until value >= 1
// (cuStreamWaitValue32 GEQ). The daemon stores status, then value with release, then wakes
// FUTEX waiters on `value` (shared). On abort, error or a dead daemon the client sets it itself,
// so a stream never waits forever.
struct DoneFlag {
  std::atomic<uint32_t> value;
  int32_t status;  // hc::Code
};
static_assert(sizeof(DoneFlag) == 8);

// The first page of the segment. Counters are free-running uint32; index = counter & (entries-1).
// Each word sits on its own cache line so the two writers never share one.
//
// Wake-up handshake (the io_uring SQ_NEED_WAKEUP idea), the same on both rings:
//   producer: write entry; tail.store(release); fence(seq_cst); if (sleeper flag) wake.
//   consumer: before sleeping: flag.store; fence(seq_cst); recheck tail; sleep only if empty.
// The two seq_cst fences order each side's store before its load, so either the producer sees
// the flag or the consumer sees the new tail: a wake-up is never lost, and a running peer is
// never woken for nothing.
struct SegmentHeader {
  uint32_t magic;  // kSegmentMagic
  uint16_t major;
  uint16_t minor;
  uint64_t segmentBytes;
  uint32_t ringEntries;
  uint32_t reserved;
  alignas(64) std::atomic<uint32_t> submitTail;      // written by the client
  alignas(64) std::atomic<uint32_t> submitHead;      // written by the daemon
  alignas(64) std::atomic<uint32_t> daemonSleeping;  // daemon sets it before epoll_wait
  alignas(64) std::atomic<uint32_t> completionTail;  // written by the daemon
  alignas(64) std::atomic<uint32_t> completionHead;  // written by the client
  // Bumped by the daemon after every batch of completions; clients FUTEX_WAIT on it (shared).
  alignas(64) std::atomic<uint32_t> completionFutex;
  alignas(64) std::atomic<uint32_t> clientSleepers;  // client threads inside FUTEX_WAIT
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(SegmentHeader) <= 4096);

constexpr uint64_t kHeaderBytes = 4096;

// Offsets of the parts of a segment with `entries` ring slots, page aligned.
struct SegmentLayout {
  uint64_t submitOffset;
  uint64_t completionOffset;
  uint64_t heapOffset;
  uint64_t heapBytes;
};
constexpr SegmentLayout segmentLayout(uint64_t segmentBytes, uint32_t entries) {
  auto pageUp = [](uint64_t v) {
    return (v + kHeapAlignment - 1) / kHeapAlignment * kHeapAlignment;
  };
  SegmentLayout l{};
  l.submitOffset = kHeaderBytes;
  l.completionOffset = pageUp(l.submitOffset + uint64_t{entries} * sizeof(SubmitEntry));
  l.heapOffset = pageUp(l.completionOffset + uint64_t{entries} * sizeof(CompletionEntry));
  l.heapBytes = segmentBytes > l.heapOffset ? segmentBytes - l.heapOffset : 0;
  return l;
}

}  // namespace hc::ipc
