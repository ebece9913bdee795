#include "prepfs/partition/cpu_controller.h"

#include <fmt/format.h>

#include <algorithm>

namespace prepfs {

CpuController::CpuController(CpuControllerConfig cfg, unsigned start_slots) : cfg_(cfg) {
  cfg_.min_slots = std::max(1u, cfg_.min_slots);
  cfg_.max_slots = std::max(cfg_.min_slots, cfg_.max_slots);
  slots_ = std::clamp(start_slots, cfg_.min_slots, cfg_.max_slots);
}

CpuDecision CpuController::step(const CpuWindow& w) {
  const double wall = w.wall_s > 0 ? w.wall_s : 1;
  const double stall = w.stall_s / wall;  // readers waiting on a slot, on average
  const double busy = w.busy_s / wall;    // slots in use, on average
  const std::string seen =
      fmt::format("renders waited {:.3f} s/s for a slot, {:.2f} of {} slots busy, {:.2f} cores idle", stall, busy,
                  slots_, w.idle_cores);
  CpuDecision d;
  if (stall >= cfg_.grow_stall) {
    calm_ = 0;
    if (slots_ >= cfg_.max_slots) {
      d.why = seen + fmt::format("; at the machine's {} cores already", cfg_.max_slots);
    } else if (w.idle_cores < cfg_.min_idle_cores) {
      d.why = seen + "; no idle core to give: another slot would only take CPU from the readers";
    } else {
      slots_++;
      d.change = +1;
      d.why = seen + fmt::format("; grew to {}", slots_);
    }
  } else if (stall < cfg_.shrink_stall) {
    calm_++;
    const bool mostly_idle = busy <= cfg_.shrink_busy_share * double(slots_ - 1);
    if (slots_ > cfg_.min_slots && calm_ >= cfg_.calm_ticks && mostly_idle) {
      slots_--;
      d.change = -1;
      calm_ = 0;
      d.why = seen + fmt::format("; no wait for {} windows: shrank to {}", cfg_.calm_ticks, slots_);
    } else {
      d.why = seen + "; held";
    }
  } else {
    calm_ = 0;
    d.why = seen + "; held (a little waiting)";
  }
  d.slots = slots_;
  return d;
}

}  // namespace prepfs
