// The environment: NCCL_DEBUG (VERSION prints a banner naming hetero-comm; WARN and above log
// each failure's text; INFO the events and the NCCL_* variables that have no effect here),
// NCCL_DEBUG_FILE, and the banner itself.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

extern char** environ;

#include "shim/src/shim.h"

namespace hc::shim {
namespace {

DebugLevel parseLevel(const char* v) {
  if (v == nullptr) return DebugLevel::None;
  if (strcasecmp(v, "VERSION") == 0) return DebugLevel::Version;
  if (strcasecmp(v, "WARN") == 0) return DebugLevel::Warn;
  if (strcasecmp(v, "INFO") == 0) return DebugLevel::Info;
  if (strcasecmp(v, "TRACE") == 0) return DebugLevel::Trace;
  return DebugLevel::None;
}

// -1: not read yet.
std::atomic<int> gLevel{-1};
std::atomic<bool> gBannerPrinted{false};

std::mutex gSinkMutex;
FILE* gSink = nullptr;  // stderr, or NCCL_DEBUG_FILE once opened

// The variables the shim reads; every other NCCL_* one tunes NCCL's own transports and
// algorithms, which the daemon replaces, so it is reported at INFO as having no effect.
constexpr const char* kHonoured[] = {"NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_COMM_BLOCKING",
                                     "NCCL_COMM_ID"};

// NCCL_DEBUG_FILE with %h (host name) and %p (pid) expanded, as NCCL does.
std::string debugFileName(const char* pattern) {
  std::string out;
  for (const char* c = pattern; *c != '\0'; ++c) {
    if (c[0] == '%' && c[1] == 'h') {
      char host[256] = {};
      (void)gethostname(host, sizeof host - 1);
      out += host;
      ++c;
    } else if (c[0] == '%' && c[1] == 'p') {
      out += std::to_string(getpid());
      ++c;
    } else {
      out += *c;
    }
  }
  return out;
}

FILE* sink() {
  if (gSink != nullptr) return gSink;
  gSink = stderr;
  const char* file = std::getenv("NCCL_DEBUG_FILE");
  if (file != nullptr && *file != '\0') {
    FILE* f = std::fopen(debugFileName(file).c_str(), "w");
    if (f != nullptr) {
      std::setvbuf(f, nullptr, _IOLBF, 0);
      gSink = f;
    }
  }
  return gSink;
}

void reportIgnoredVariablesOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      if (std::strncmp(*e, "NCCL_", 5) != 0) continue;
      const char* eq = std::strchr(*e, '=');
      const std::string name(*e, eq != nullptr ? static_cast<size_t>(eq - *e) : std::strlen(*e));
      bool honoured = false;
      for (const char* h : kHonoured) honoured = honoured || name == h;
      if (!honoured) {
        debugLine("INFO", name + " is set and has no effect: hetero-commd chooses transports "
                                 "and algorithms for the node");
      }
    }
  });
}

}  // namespace

void debugLine(const char* level, const std::string& text) {
  char host[64] = {};
  (void)gethostname(host, sizeof host - 1);
  std::lock_guard<std::mutex> lock(gSinkMutex);
  std::fprintf(sink(), "%s:%d:%ld NCCL %s %s: %s\n", host, static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), level, libraryName(), text.c_str());
}

std::string pointerText(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

void info(const std::string& text) {
  if (debugLevel() < DebugLevel::Info) return;
  reportIgnoredVariablesOnce();
  debugLine("INFO", text);
}

DebugLevel debugLevel() {
  int level = gLevel.load(std::memory_order_relaxed);
  if (level < 0) {
    level = static_cast<int>(parseLevel(std::getenv("NCCL_DEBUG")));
    gLevel.store(level, std::memory_order_relaxed);
  }
  return static_cast<DebugLevel>(level);
}

void rereadDebugEnv() {
  gLevel.store(-1, std::memory_order_relaxed);
  gBannerPrinted.store(false, std::memory_order_relaxed);
}

void printBannerOnce() {
  if (debugLevel() < DebugLevel::Version || gBannerPrinted.exchange(true)) return;
  int hcVersion = 0;
  (void)hc_get_version(&hcVersion);
  const char* socket = std::getenv("HC_SOCKET");
  std::lock_guard<std::mutex> lock(gSinkMutex);
  std::fprintf(sink(),
               "NCCL version %d.%d.%d+hetero-comm %d.%d.%d (%s over libhcclient; daemon "
               "hetero-commd at %s)\n",
               NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, hcVersion / 10000, hcVersion / 100 % 100,
               hcVersion % 100, libraryName(), socket != nullptr ? socket : "the default socket");
}

}  // namespace hc::shim

extern "C" void ncclResetDebugInit(void) { hc::shim::rereadDebugEnv(); }

HC_NCCL_TWIN(ncclResetDebugInit)
