// The client's side of cross-memory attach (protocol.h, CmaProbeFrame): opted into with
// HC_CROSS_MEMORY_ATTACH=1, probed once per connection, before the connection is shared. The
// probe hands the daemon this process's /proc/self/mem, so the daemon reaches this address space
// only, with the rights this process has over itself, and nothing after an exec. When the probe
// passes, host memory outside the segment goes to the daemon by address and the daemon stages it
// itself; otherwise the client keeps copying it through its segment, and the reason is kept for
// hc_get_memory_path. Nothing is printed: the daemon logs the outcome of every probe.
#include <fcntl.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "client/src/connection.h"
#include "common/ipc/frames.h"

namespace hc::client {
namespace {

constexpr const char* kEnvName = "HC_CROSS_MEMORY_ATTACH";
constexpr const char* kAttached = "cross-memory attach";

bool requested() {
  const char* v = std::getenv(kEnvName);
  if (v == nullptr) return false;
  for (const char* yes : {"1", "true", "yes", "on"}) {
    if (::strcasecmp(v, yes) == 0) return true;
  }
  return false;
}

std::string stagedBecause(std::string_view why) {
  return "segment staging (cross-memory attach " + std::string(why) + ")";
}

// One private, anonymous page holding the probe's pattern. Private and outside the segment on
// purpose: the daemon maps the segment, so only the descriptor the probe carries can reach this
// page, and a pass proves that path for this process in both directions.
class ProbePage {
 public:
  ProbePage() {
    const long pageBytes = ::sysconf(_SC_PAGESIZE);
    bytes_ = pageBytes > 0 ? static_cast<size_t>(pageBytes) : 4096;
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    page_ = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~ProbePage() {
    if (page_ != nullptr) ::munmap(page_, bytes_);
  }
  ProbePage(const ProbePage&) = delete;
  ProbePage& operator=(const ProbePage&) = delete;

  // Fills the page's head and frame.pattern with the same fresh random bytes, and frame.address
  // with where they are. Random, so that nothing but a real read of this page can echo them.
  Status fill(ipc::CmaProbeFrame* frame) {
    if (page_ == nullptr) return systemError("mmap of the probe page", errno);
    if (::getrandom(frame->pattern, sizeof(frame->pattern), 0) !=
        static_cast<ssize_t>(sizeof(frame->pattern))) {
      return systemError("getrandom", errno);
    }
    std::memcpy(page_, frame->pattern, sizeof(frame->pattern));
    frame->address = reinterpret_cast<uintptr_t>(page_);
    return okStatus();
  }

  // Whether the page now holds the bitwise complement of the pattern: the daemon's write landed.
  bool holdsComplementOf(const uint8_t (&pattern)[ipc::kCmaPatternBytes]) const {
    // The daemon wrote through the kernel, behind the compiler's back.
    const volatile uint8_t* seen = page_;
    for (size_t i = 0; i < ipc::kCmaPatternBytes; ++i) {
      if (seen[i] != static_cast<uint8_t>(~pattern[i])) return false;
    }
    return true;
  }

 private:
  uint8_t* page_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace

Connection::ProbeOutcome Connection::probeCrossMemoryAttach() {
  crossMemoryAttach_ = false;
  if (!requested()) {
    memoryPath_ = stagedBecause(std::string("not requested: set ") + kEnvName + "=1");
    return ProbeOutcome::Decided;
  }
  if (daemonMinor_ < ipc::kCmaProbeFdMinor) {
    // Such a daemon would read this process by pid, which an exec here would redirect: not asked.
    memoryPath_ = stagedBecause("unavailable: this hetero-commd speaks protocol 1." +
                                std::to_string(daemonMinor_) + ", and the attach needs 1." +
                                std::to_string(ipc::kCmaProbeFdMinor) + ": update the daemon");
    return ProbeOutcome::Decided;
  }
  ProbePage page;
  const uint32_t id = nextFrameId_++;
  auto probe = ipc::makeFrame<ipc::CmaProbeFrame>(ipc::FrameType::CmaProbe, id);
  if (Status s = page.fill(&probe); !s.isOk()) {
    memoryPath_ = stagedBecause("not probed: " + s.message());
    return ProbeOutcome::Decided;
  }
  // Opened here, as this process: the kernel lets a process open its own mem file without ptrace
  // rights (a process that is not dumpable cannot unless it runs as root: the file is root's).
  // Close-on-exec, and the daemon's copy reaches this address space only, never a new image.
  const int memFd = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  if (memFd < 0) {
    memoryPath_ = stagedBecause(std::string("not probed: cannot open /proc/self/mem: ") +
                                std::strerror(errno));
    return ProbeOutcome::Decided;
  }
  const int fds[1] = {memFd};
  auto reply = request(ipc::frameBytes(probe), id, fds);
  ::close(memFd);
  if (!reply.isOk() || ipc::frameAs<ipc::FrameHeader>(*reply).type !=
                           static_cast<uint16_t>(ipc::FrameType::CmaProbeReply)) {
    // The daemon answers requests it does not know with Error and closes the connection.
    const std::string why = reply.isOk() ? "an unexpected reply" : reply.status().message();
    memoryPath_ = stagedBecause("unavailable: this hetero-commd does not support it (" + why + ")");
    return ProbeOutcome::ConnectionLost;
  }
  auto answer = ipc::frameAs<ipc::CmaProbeReplyFrame>(*reply);
  if (answer.status != static_cast<int32_t>(Code::Ok)) {
    // The daemon's words: disabled by its configuration, or why it refused the descriptor.
    memoryPath_ = stagedBecause(std::string("unavailable: ") + answer.message);
    return ProbeOutcome::Decided;
  }
  if (!page.holdsComplementOf(probe.pattern)) {
    memoryPath_ = stagedBecause(
        "unavailable: hetero-commd reported success, but its write did not "
        "reach this process's probe page");
    return ProbeOutcome::Decided;
  }
  crossMemoryAttach_ = true;
  memoryPath_ = kAttached;
  return ProbeOutcome::Decided;
}

}  // namespace hc::client
