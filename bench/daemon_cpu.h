// The CPU time of the daemon that serves hc-perf, for its CPU-seconds per GB: the daemon's pid
// from the socket's peer credentials (SO_PEERCRED), and its process CPU clock, every thread
// included, in nanoseconds where the kernel offers it (clock_getcpuclockid), else utime + stime
// from /proc/<pid>/stat in clock ticks (10 ms on most systems: coarse for short batches).
#pragma once

#include <sys/types.h>

#include <string>

namespace hc::bench {

// The pid of the process listening on the Unix (seqpacket) socket at path, or -1 (with *error
// saying why).
// Connects once and closes at once: the daemon sees a client that leaves before its hello.
pid_t daemonPid(const std::string& path, std::string* error);

// CPU seconds pid has used so far, every thread together; < 0 when it cannot be read.
double processCpuSeconds(pid_t pid);

// utime + stime in seconds from the text of /proc/<pid>/stat; < 0 when malformed. The command
// name (field 2) may hold spaces and parentheses, so fields are counted after its last ')'.
double cpuSecondsFromStat(const std::string& stat, long ticksPerSecond);

}  // namespace hc::bench
