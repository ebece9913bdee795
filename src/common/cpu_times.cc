#include "prepfs/common/cpu_times.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace prepfs {

std::optional<CpuTimes> parse_cpu_times(std::string_view proc_stat) {
  if (!proc_stat.starts_with("cpu ")) return std::nullopt;
  const size_t eol = proc_stat.find('\n');
  std::istringstream line(std::string(proc_stat.substr(4, eol == std::string_view::npos ? eol : eol - 4)));
  // user nice system idle iowait irq softirq steal (guest time is already in user and nice)
  uint64_t v[8] = {};
  int n = 0;
  while (n < 8 && line >> v[n]) n++;
  if (n < 4) return std::nullopt;
  CpuTimes t;
  t.idle = v[3] + v[4];
  for (int i = 0; i < n; i++) t.total += v[i];
  return t;
}

std::optional<CpuTimes> read_cpu_times(const std::string& path) {
  std::ifstream f(path);
  std::string first;
  if (!f || !std::getline(f, first)) return std::nullopt;
  return parse_cpu_times(first);
}

double idle_cores(const CpuTimes& before, const CpuTimes& after, unsigned online) {
  if (after.total <= before.total || after.idle < before.idle) return 0;
  const double share = double(after.idle - before.idle) / double(after.total - before.total);
  return std::clamp(share, 0.0, 1.0) * online;
}

unsigned usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return online_cpus();
}

unsigned online_cpus() { return unsigned(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))); }

}  // namespace prepfs
