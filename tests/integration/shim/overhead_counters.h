// What hc_shim_overhead_test counts in its measured rank, and where: heap calls (malloc, calloc,
// realloc, aligned allocations, free), interposed in the test executable, so that calls from
// libnccl.so.2 and libhcclient.so.1 land here too; and the calls of hc_allreduce and hc_wait,
// interposed the same way, which split every count into work done inside libhcclient's calls and
// work done outside them (by the shim's own code, or by the test's loop).
//
// The executable exports its definitions (ENABLE_EXPORTS), so the shim's calls to hc_allreduce
// and hc_wait bind to them; each forwards to libhcclient's (dlsym RTLD_NEXT).
#pragma once

#include <cstdint>

namespace hc::integ::overhead {

// Which measured loop the rank is in: nothing is counted in kNone.
// kAsync: ncclCommGetAsyncError alone, as a watchdog polls it.
enum Window : int32_t { kNone = 0, kHc = 1, kNccl = 2, kProbe = 3, kAsync = 4, kWindows = 5 };

// One aligned word, so a tracer reads both fields with one PTRACE_PEEKDATA at &gProbe (the
// measured rank is a fork of the tracer: the address is the same in both).
struct alignas(8) Probe {
  int32_t window;   // a Window
  int32_t hcDepth;  // > 0 while the measured thread is inside an interposed hc_* call
};
extern volatile Probe gProbe;

struct Counts {
  uint64_t allocs[kWindows][2];  // [window][0: outside hc's calls, 1: inside them]
  uint64_t frees[kWindows][2];
  uint64_t hcAllreduce[kWindows];  // outermost calls
  uint64_t hcWait[kWindows];
};
// Written only by the measured thread.
extern Counts gCounts;

// Makes the calling thread the measured one (no other thread is counted), and resolves the real
// hc_allreduce and hc_wait before anything is counted.
void measureThisThread();

// Whether the heap interposers are compiled in: sanitizers bring their own allocator.
bool heapCounted();

// Sets the window; a compiler barrier on each side keeps the loop's calls inside it.
void enterWindow(Window w);
void leaveWindow();

}  // namespace hc::integ::overhead
