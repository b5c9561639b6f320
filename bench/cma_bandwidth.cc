// hc-cma-bw: what the daemon's copies of a client's own memory (cross-memory attach) cost, by the
// two kernel paths there are: pread/pwrite on the client's /proc/self/mem, the path the daemon
// takes (daemon/session/process_memory.h), beside process_vm_readv/writev on the client's pid,
// the path it took before (it reaches whatever program the pid runs, so it cannot be made safe
// against an exec). A forked child plays the client: it maps and touches the memory, opens its
// own /proc/self/mem and sends it over a socket, as libhcclient's probe does; this process plays
// the daemon and copies between the child and its own pre-faulted buffer.
//
//   hc-cma-bw [--sizes 1M,16M,256M] [--reps 9] [--sample-bytes 64M]
//
// Each sample copies at least --sample-bytes (the same range again for small sizes, as a trainer
// reuses its buffers), in both directions by both paths and with a local memcpy for reference,
// in a rotating order; the table shows medians over --reps samples (min..max beside) in GB/s.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/seqpacket.h"

namespace hc::bench {
namespace {

enum Method { kPread, kPvmRead, kPwrite, kPvmWrite, kMemcpy, kMethods };
constexpr const char* kNames[kMethods] = {"pread", "pvm_readv", "pwrite", "pvm_writev", "memcpy"};

struct Options {
  std::vector<size_t> sizes = {1u << 20, 16u << 20, 256u << 20};
  int reps = 9;
  size_t sampleBytes = 64u << 20;
};

size_t parseBytes(std::string_view s) {
  char* end = nullptr;
  const std::string text(s);
  size_t v = std::strtoull(text.c_str(), &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  if (*end == 'G' || *end == 'g') v <<= 30;
  return v;
}

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view a = argv[i];
    if (a == "--reps") {
      o->reps = std::max(1, std::atoi(argv[i + 1]));
    } else if (a == "--sample-bytes") {
      o->sampleBytes = parseBytes(argv[i + 1]);
    } else if (a == "--sizes") {
      o->sizes.clear();
      std::string_view list = argv[i + 1];
      while (!list.empty()) {
        const size_t comma = list.find(',');
        o->sizes.push_back(parseBytes(list.substr(0, comma)));
        list = comma == std::string_view::npos ? "" : list.substr(comma + 1);
      }
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && !o->sizes.empty() &&
         std::none_of(o->sizes.begin(), o->sizes.end(), [](size_t s) { return s == 0; });
}

// The client: touches `bytes` of private memory, sends its address and /proc/self/mem, and
// lives until the other end closes the socket.
[[noreturn]] void runClient(int sock, size_t bytes) {
  auto* mem = static_cast<uint8_t*>(
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED) ::_exit(2);
  for (size_t i = 0; i < bytes; ++i) mem[i] = static_cast<uint8_t>(i * 7 + 3);
  const int fd = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  const uint64_t address = reinterpret_cast<uintptr_t>(mem);
  const int fds[1] = {fd};
  if (fd < 0 || !sendMessage(sock, {reinterpret_cast<const uint8_t*>(&address), 8}, fds).isOk()) {
    ::_exit(3);
  }
  char c;
  while (::read(sock, &c, 1) > 0) {
  }
  ::_exit(0);
}

struct Client {
  pid_t pid;
  int memFd;
  uint64_t address;
};

// One copy of n bytes between the client at `remote` and `local`; false on a failed call.
bool copyOnce(Method m, const Client& c, uint64_t remote, uint8_t* local, uint8_t* scratch,
              size_t n) {
  size_t done = 0;
  while (done < n) {
    iovec mine{local + done, n - done};
    iovec theirs{reinterpret_cast<void*>(remote + done), n - done};
    const off_t at = static_cast<off_t>(remote + done);
    ssize_t r = 0;
    switch (m) {
      case kPread:
        r = ::pread(c.memFd, local + done, n - done, at);
        break;
      case kPwrite:
        r = ::pwrite(c.memFd, local + done, n - done, at);
        break;
      case kPvmRead:
        r = ::process_vm_readv(c.pid, &mine, 1, &theirs, 1, 0);
        break;
      case kPvmWrite:
        r = ::process_vm_writev(c.pid, &mine, 1, &theirs, 1, 0);
        break;
      default:
        std::memcpy(local, scratch, n);
        r = static_cast<ssize_t>(n);
        break;
    }
    if (r <= 0) {
      std::fprintf(stderr, "%s at +%zu: %s\n", kNames[m], done, r < 0 ? std::strerror(errno) : "0");
      return false;
    }
    done += static_cast<size_t>(r);
  }
  return true;
}

double sampleGBs(Method m, const Client& c, uint8_t* local, uint8_t* scratch, size_t size,
                 size_t sampleBytes) {
  const size_t iters = std::max<size_t>(1, sampleBytes / size);
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < iters; ++i) {
    if (!copyOnce(m, c, c.address, local, scratch, size)) return -1;
  }
  const std::chrono::duration<double> t = std::chrono::steady_clock::now() - start;
  return static_cast<double>(size * iters) / t.count() / 1e9;
}

int run(const Options& o) {
  const size_t maxBytes = *std::max_element(o.sizes.begin(), o.sizes.end());
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return 1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pair[0]);
    runClient(pair[1], maxBytes);
  }
  ::close(pair[1]);
  auto msg = receiveMessage(pair[0], 8, true);
  if (!msg.isOk() || msg->bytes.size() != 8 || msg->fds.size() != 1) {
    std::fprintf(stderr, "the client did not send its memory\n");
    return 1;
  }
  Client c{pid, msg->fds[0].get(), 0};
  std::memcpy(&c.address, msg->bytes.data(), 8);
  std::vector<uint8_t> local(maxBytes, 1), scratch(maxBytes, 2);  // touched: pre-faulted

  // Both paths must see the client's bytes before any is timed.
  std::vector<uint8_t> check(4096);
  for (Method m : {kPread, kPvmRead}) {
    std::fill(check.begin(), check.end(), 0);
    bool ok = copyOnce(m, c, c.address + 4096, check.data(), nullptr, check.size());
    for (size_t i = 0; ok && i < check.size(); ++i) {
      ok = check[i] == static_cast<uint8_t>((4096 + i) * 7 + 3);
    }
    if (!ok) {
      std::printf("# %s does not reach the client (refused or wrong bytes)\n", kNames[m]);
      return 1;
    }
  }

  std::printf(
      "# hc-cma-bw: the daemon's copies of a client's own memory, GB/s, median (min..max)"
      " of %d samples of >= %zu MiB each\n# client pid %d, %ld CPUs online\n",
      o.reps, o.sampleBytes >> 20, static_cast<int>(pid), ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%10s %-11s %20s %20s %8s\n", "bytes", "direction", "/proc/pid/mem", "process_vm",
              "mem/pvm");
  for (size_t size : o.sizes) {
    std::vector<std::vector<double>> gbs(kMethods);
    for (int rep = 0; rep < o.reps; ++rep) {
      for (int k = 0; k < kMethods; ++k) {
        const auto m = static_cast<Method>((k + rep) % kMethods);  // rotating order
        const double v = sampleGBs(m, c, local.data(), scratch.data(), size, o.sampleBytes);
        if (v < 0) return 1;
        gbs[m].push_back(v);
      }
    }
    auto stat = [&](Method m) {
      std::vector<double> v = gbs[m];
      std::sort(v.begin(), v.end());
      return std::vector<double>{v[v.size() / 2], v.front(), v.back()};
    };
    auto cell = [](const std::vector<double>& s) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.2f (%.2f..%.2f)", s[0], s[1], s[2]);
      return std::string(buf);
    };
    for (auto [mem, pvm, dir] :
         {std::tuple{kPread, kPvmRead, "read"}, std::tuple{kPwrite, kPvmWrite, "write"}}) {
      const auto a = stat(mem), b = stat(pvm);
      std::printf("%10zu %-11s %20s %20s %8.2f\n", size, dir, cell(a).c_str(), cell(b).c_str(),
                  a[0] / b[0]);
    }
    std::printf("%10zu %-11s %20s\n", size, "memcpy", cell(stat(kMemcpy)).c_str());
  }
  ::close(pair[0]);  // the client exits
  ::waitpid(pid, nullptr, 0);
  return 0;
}

}  // namespace
}  // namespace hc::bench

int main(int argc, char** argv) {
  hc::bench::Options o;
  if (!hc::bench::parseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: hc-cma-bw [--sizes 1M,16M,256M] [--reps 9] [--sample-bytes 64M]\n");
    return 2;
  }
  return hc::bench::run(o);
}
