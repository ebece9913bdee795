// cpu=auto's decision rule: how many transforms may run at once (cpu slots), from one window of
// measurements at a time. Cachew-style autoscaling on one node: add a worker while the consumers
// stall on the transforms and the machine has CPU to give; take one away once they have stopped
// waiting and the slots are mostly idle. A pure function of the windows it was given (no clock,
// no I/O), so a scripted trace of stalls and idle CPU always gives the same decisions.
#pragma once

#include <string>

namespace prepfs {

// One window (a profiler tick) as the controller sees it.
struct CpuWindow {
  double wall_s = 1;      // its length
  double stall_s = 0;     // time renders waited for a cpu slot, summed over renders
  double busy_s = 0;      // time cpu slots were held, summed over slots
  double idle_cores = 0;  // the machine's idle CPU over the window, in cores (/proc/stat)
};

struct CpuControllerConfig {
  unsigned min_slots = 1;
  unsigned max_slots = 1;  // the machine's cores: never more
  // Grow when renders waited at least this long per second of wall time (on average that many
  // readers were stalled on a slot) and at least min_idle_cores of the machine were idle.
  double grow_stall = 0.05;
  double min_idle_cores = 0.5;
  // Shrink after calm_ticks windows in a row with less stall than shrink_stall per second and
  // at most shrink_busy_share of one slot fewer in use (so the smaller count would not make
  // readers wait again at once).
  double shrink_stall = 0.01;
  unsigned calm_ticks = 3;
  double shrink_busy_share = 0.5;
};

struct CpuDecision {
  unsigned slots = 1;
  int change = 0;   // +1 grew, -1 shrank, 0 held
  std::string why;  // one line, for .prepfs/plan
};

class CpuController {
 public:
  CpuController(CpuControllerConfig cfg, unsigned start_slots);
  // The decision after one more window.
  CpuDecision step(const CpuWindow& w);
  unsigned slots() const { return slots_; }
  const CpuControllerConfig& config() const { return cfg_; }

 private:
  CpuControllerConfig cfg_;
  unsigned slots_;
  unsigned calm_ = 0;  // consecutive windows without stall
};

}  // namespace prepfs
