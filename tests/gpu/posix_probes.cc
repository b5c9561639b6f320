// The primitives that need no GPU: sealed memfd segments, passing one by SCM_RIGHTS, and a shared
// futex between two processes. The design rests on each: the daemon hands every client a sealed
// memfd over the local socket and wakes it with FUTEX_WAKE on a word in that segment.
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "tests/gpu/probe.h"

namespace hc::gpuprobe {
namespace {

constexpr int kTheSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
constexpr size_t kSegmentBytes = 1 << 20;

// "refused (EPERM)", or "allowed" when the call went through.
std::string refusal(bool succeeded, int error) {
  if (succeeded) return "allowed";
  return error == EPERM ? "refused(EPERM)" : "refused(" + errnoText(error) + ")";
}

// The value the child writes at word i, and the parent expects there.
uint32_t patternAt(size_t i) { return static_cast<uint32_t>(i) * 2654435761u ^ 0x5ca1ab1eu; }

// Closes an fd at scope exit: these primitives return early on every failure.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// The page the two processes of shared_futex share: word is the futex, the rest the handshake.
struct FutexPage {
  uint32_t word;      // the round the waker released; the futex word
  uint32_t sleeping;  // the round the waiter is about to sleep for
  uint32_t acked;     // the round the waiter woke from
  uint32_t done;      // 1: the waiter leaves after its next wake
  int64_t wokeAt;     // monotonicNanos() when the waiter woke
};
template <typename T>
std::atomic_ref<T> shared(T& field) {
  return std::atomic_ref<T>(field);
}

long futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

// The sleeping side, in the forked child: sleeps for round 1, 2, ... until told it is done. Exits
// 3 when a wake never comes.
[[noreturn]] void futexWaiter(FutexPage* page) {
  for (uint32_t round = 1;; ++round) {
    // Publish the round first, then sleep only while the word still says the previous round: a
    // release that lands between the two makes FUTEX_WAIT return EAGAIN instead of sleeping.
    shared(page->sleeping).store(round, std::memory_order_seq_cst);
    while (shared(page->word).load(std::memory_order_seq_cst) < round) {
      const timespec limit{5, 0};
      if (futex(&page->word, FUTEX_WAIT, round - 1, &limit) != 0 && errno == ETIMEDOUT) {
        ::_exit(3);
      }
    }
    shared(page->wokeAt).store(monotonicNanos(), std::memory_order_relaxed);
    shared(page->acked).store(round, std::memory_order_seq_cst);
    if (shared(page->done).load(std::memory_order_seq_cst) != 0) ::_exit(0);
  }
}

// Spins (yielding) until `field` reaches `value`; false after 5 s.
bool awaitRound(uint32_t& field, uint32_t value) {
  const int64_t deadline = monotonicMicros() + 5'000'000;
  while (shared(field).load(std::memory_order_seq_cst) < value) {
    if (monotonicMicros() > deadline) return false;
    ::sched_yield();
  }
  return true;
}

}  // namespace

Outcome probeMemfdSeals(const ProbeOptions&) {
  const int fd = ::memfd_create("hc-probe-seals", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  if (fd < 0) return fail("memfd_create(MFD_ALLOW_SEALING): " + errnoText(errno));
  FdCloser closer{fd};
  if (::ftruncate(fd, kSegmentBytes) != 0) return fail("ftruncate: " + errnoText(errno));
  if (::fcntl(fd, F_ADD_SEALS, kTheSeals) != 0) {
    return fail("fcntl(F_ADD_SEALS, SHRINK|GROW|SEAL): " + errnoText(errno));
  }
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals != kTheSeals) {
    return fail("F_GET_SEALS says " + std::to_string(seals) + ", not " + std::to_string(kTheSeals));
  }

  // Each way of changing the size, and of loosening the seals, must be refused.
  bool ok = ::ftruncate(fd, 2 * kSegmentBytes) == 0;
  const std::string grow = refusal(ok, errno);
  ok = ::ftruncate(fd, kSegmentBytes / 2) == 0;
  const std::string shrink = refusal(ok, errno);
  const char byte = 1;
  ok = ::pwrite(fd, &byte, 1, kSegmentBytes) == 1;
  const std::string writePastEnd = refusal(ok, errno);
  ok = ::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) == 0;
  const std::string addSeal = refusal(ok, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail("fstat: " + errnoText(errno));
  char sealsHex[16];
  std::snprintf(sealsHex, sizeof(sealsHex), "0x%x", static_cast<unsigned>(seals));
  const std::string figures = "size=" + std::to_string(st.st_size) + " seals=" + sealsHex +
                              " grow=" + grow + " shrink=" + shrink +
                              " write_past_end=" + writePastEnd + " add_seal=" + addSeal;
  if (grow != "refused(EPERM)" || shrink != "refused(EPERM)" || writePastEnd != "refused(EPERM)" ||
      addSeal != "refused(EPERM)" || st.st_size != static_cast<off_t>(kSegmentBytes)) {
    return fail(figures);
  }

  // Writing inside the segment stays allowed: only the size is sealed.
  if (::pwrite(fd, &byte, 1, kSegmentBytes - 1) != 1) {
    return fail(figures + "; a write inside the segment failed: " + errnoText(errno));
  }
  return pass(figures);
}

Outcome probeScmRights(const ProbeOptions&) {
  const int fd = ::memfd_create("hc-probe-scm", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  if (fd < 0) return fail("memfd_create: " + errnoText(errno));
  FdCloser closeSegment{fd};
  if (::ftruncate(fd, kSegmentBytes) != 0) return fail("ftruncate: " + errnoText(errno));
  // Sealed as the daemon seals a client's segment, so the receiver may trust its size.
  if (::fcntl(fd, F_ADD_SEALS, kTheSeals) != 0) return fail("F_ADD_SEALS: " + errnoText(errno));
  int sock[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) != 0) {
    return fail("socketpair(SOCK_SEQPACKET): " + errnoText(errno));
  }
  FdCloser closeParent{sock[0]};
  FdCloser closeChild{sock[1]};

  const pid_t child = ::fork();
  if (child < 0) return fail("fork: " + errnoText(errno));
  if (child == 0) {
    // The receiver: map what arrived, write the pattern, say so. It never sees the parent's fd
    // number, only the one SCM_RIGHTS gave it.
    ::close(fd);
    PeerMessage message{};
    int received = -1;
    std::string why = receivePeer(sock[1], &message, &received);
    if (why.empty() && received < 0) why = "no descriptor came with the message";
    void* map = MAP_FAILED;
    struct stat st {};
    if (why.empty() && ::fstat(received, &st) != 0) why = "fstat: " + errnoText(errno);
    if (why.empty()) {
      map = ::mmap(nullptr, kSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, received, 0);
      if (map == MAP_FAILED) why = "mmap of the received fd: " + errnoText(errno);
    }
    if (why.empty()) {
      auto* words = static_cast<uint32_t*>(map);
      for (size_t i = 0; i < kSegmentBytes / 4; ++i) words[i] = patternAt(i);
      ::munmap(map, kSegmentBytes);
    }
    PeerMessage reply{};
    reply.ok = why.empty() ? 1 : 0;
    reply.bytes = static_cast<uint64_t>(st.st_ino);  // the file it got, for the parent to compare
    setPeerText(&reply, why);
    ::_exit(sendPeer(sock[1], reply).empty() && why.empty() ? 0 : 1);
  }

  PeerMessage message{};
  message.bytes = kSegmentBytes;
  std::string why = sendPeer(sock[0], message, fd);
  PeerMessage reply{};
  if (why.empty()) why = receivePeer(sock[0], &reply);
  int status = 0;
  if (!waitWithTimeout(child, 5000, &status)) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  if (!why.empty()) return fail(why + " (receiver: " + describeWaitStatus(status) + ")");
  if (reply.ok != 1) return fail(std::string("receiver: ") + reply.text);

  struct stat st {};
  (void)::fstat(fd, &st);
  void* map = ::mmap(nullptr, kSegmentBytes, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail("mmap: " + errnoText(errno));
  const auto* words = static_cast<const uint32_t*>(map);
  size_t bad = 0;
  for (size_t i = 0; i < kSegmentBytes / 4; ++i) bad += words[i] != patternAt(i) ? 1 : 0;
  ::munmap(map, kSegmentBytes);
  const std::string figures = "bytes=" + std::to_string(kSegmentBytes) +
                              " same_inode=" + (reply.bytes == st.st_ino ? "yes" : "no") +
                              " receiver=" + describeWaitStatus(status);
  if (bad != 0) return fail(figures + "; " + std::to_string(bad) + " words differ");
  return pass(figures);
}

Outcome probeSharedFutex(const ProbeOptions&) {
  constexpr size_t kSamples = 20;
  constexpr uint32_t kMaxRounds = 100;
  const int fd = ::memfd_create("hc-probe-futex", MFD_CLOEXEC);
  if (fd < 0) return fail("memfd_create: " + errnoText(errno));
  FdCloser closer{fd};
  const size_t pageBytes = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (::ftruncate(fd, static_cast<off_t>(pageBytes)) != 0) {
    return fail("ftruncate: " + errnoText(errno));
  }
  void* map = ::mmap(nullptr, pageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail("mmap: " + errnoText(errno));
  auto* page = static_cast<FutexPage*>(map);

  const pid_t child = ::fork();
  if (child < 0) return fail("fork: " + errnoText(errno));
  if (child == 0) {
    // Map the segment afresh, at another address, as a second client of a segment would: a
    // shared futex is keyed by the page, not by the address.
    void* own = ::mmap(nullptr, pageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (own == MAP_FAILED) ::_exit(2);
    ::munmap(map, pageBytes);
    futexWaiter(static_cast<FutexPage*>(own));
  }

  std::vector<double> micros;
  std::string why;
  uint32_t round = 0;
  int settleMicros = 1000;
  while (micros.size() < kSamples && round < kMaxRounds) {
    ++round;
    if (!awaitRound(page->sleeping, round)) {
      why = "the waiter never got to round " + std::to_string(round);
      break;
    }
    // Give it time to be inside FUTEX_WAIT; a round where FUTEX_WAKE found no sleeper is not a
    // sample, and makes the next wait longer (a loaded machine schedules the waiter late).
    ::usleep(settleMicros);
    const int64_t releasedAt = monotonicNanos();
    shared(page->word).store(round, std::memory_order_seq_cst);
    const long woken = futex(&page->word, FUTEX_WAKE, 1, nullptr);
    if (woken < 0) {
      why = "FUTEX_WAKE: " + errnoText(errno);
      break;
    }
    if (!awaitRound(page->acked, round)) {
      why =
          "the waiter did not wake within 5 s of FUTEX_WAKE (round " + std::to_string(round) + ")";
      break;
    }
    const int64_t wokeAt = shared(page->wokeAt).load(std::memory_order_relaxed);
    if (woken == 1) {
      micros.push_back(static_cast<double>(wokeAt - releasedAt) / 1000);
    } else {
      settleMicros = std::min(2 * settleMicros, 50'000);
    }
  }
  // Release the waiter for good: it either sees done after its last wake or sleeps once more.
  shared(page->done).store(1, std::memory_order_seq_cst);
  shared(page->word).store(round + 1, std::memory_order_seq_cst);
  (void)futex(&page->word, FUTEX_WAKE, 1, nullptr);
  int status = 0;
  if (!waitWithTimeout(child, 5000, &status)) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  ::munmap(map, pageBytes);
  if (!why.empty()) return fail(why + " (waiter: " + describeWaitStatus(status) + ")");
  if (micros.size() < kSamples) {
    return fail("FUTEX_WAKE found the waiter asleep in only " + std::to_string(micros.size()) +
                " of " + std::to_string(round) + " rounds");
  }
  std::sort(micros.begin(), micros.end());
  const double median = (micros[kSamples / 2 - 1] + micros[kSamples / 2]) / 2;
  return pass("wake_us_median=" + formatMicros(median) + " min=" + formatMicros(micros.front()) +
              " max=" + formatMicros(micros.back()) + " samples=" + std::to_string(kSamples) +
              " rounds=" + std::to_string(round));
}

}  // namespace hc::gpuprobe
