// The machine's CPU time as the kernel counts it (/proc/stat), for cpu=auto: how much of the
// machine was idle over a window, and how many cores this process may run on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace prepfs {

// Cumulative jiffies of all CPUs since boot: idle (idle + iowait) and the total.
struct CpuTimes {
  uint64_t idle = 0;
  uint64_t total = 0;
};

// The first ("cpu ") line of /proc/stat text; nullopt when it is not there or malformed.
std::optional<CpuTimes> parse_cpu_times(std::string_view proc_stat);
std::optional<CpuTimes> read_cpu_times(const std::string& path = "/proc/stat");

// Idle cores over the window between two readings: the idle share of the jiffies times the
// machine's online CPUs (0 when no time passed).
double idle_cores(const CpuTimes& before, const CpuTimes& after, unsigned online_cpus);

// CPUs this process may run on (its affinity mask), at least 1.
unsigned usable_cores();
// CPUs online on the machine (what /proc/stat's totals cover), at least 1.
unsigned online_cpus();

}  // namespace prepfs
