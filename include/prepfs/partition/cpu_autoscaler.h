// The transform workers' count at run time (cpu=): each profiler tick measures the window since
// the last one (how long renders waited for a cpu slot, how long slots were busy, the machine's
// idle CPU) and, with cpu=auto, lets the CpuController decide the slot count, which it applies to
// the renderer. With a fixed cpu=N it only measures, so .prepfs/plan shows the stall either way.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "prepfs/common/cpu_times.h"
#include "prepfs/common/stats.h"
#include "prepfs/partition/cpu_controller.h"

namespace prepfs {

struct CpuAutoscalerConfig {
  bool automatic = false;  // cpu=auto; otherwise the slots stay at fixed_slots
  unsigned fixed_slots = 1;
  unsigned cores = 1;              // the machine's cores this daemon may use: auto never goes beyond
  unsigned online_cpus = 1;        // what /proc/stat's totals cover
  unsigned start_slots = 1;        // auto's first count
  CpuControllerConfig controller;  // its min/max slots are set from cores
};

class CpuAutoscaler {
 public:
  using ApplyFn = std::function<void(unsigned slots)>;          // the renderer's set_cpu_slots
  using CpuTimesFn = std::function<std::optional<CpuTimes>()>;  // /proc/stat, or a test's script
  CpuAutoscaler(
      CpuAutoscalerConfig cfg, const RenderCounters& renders, ApplyFn apply,
      CpuTimesFn read_cpu = [] { return read_cpu_times(); });

  void tick();                                 // the window since the last tick ends now
  void tick_window(std::chrono::nanoseconds);  // the same with a given wall time (tests)

  unsigned slots() const;
  std::string report_text() const;  // a paragraph of .prepfs/plan
  std::string report_json() const;  // the "cpu" object of .prepfs/plan.json

 private:
  CpuAutoscalerConfig cfg_;
  const RenderCounters& renders_;
  ApplyFn apply_;
  CpuTimesFn read_cpu_;

  mutable std::mutex mu_;
  CpuController controller_;
  std::chrono::steady_clock::time_point last_tick_;
  uint64_t last_wait_ns_ = 0, last_busy_ns_ = 0;
  std::optional<CpuTimes> last_cpu_;
  uint64_t ticks_ = 0, grows_ = 0, shrinks_ = 0;
  CpuWindow last_window_;
  CpuDecision last_;         // of the latest tick
  CpuDecision last_change_;  // of the latest tick that changed the count (change 0: none yet)
  uint64_t last_change_tick_ = 0;
};

}  // namespace prepfs
