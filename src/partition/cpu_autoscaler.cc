#include "prepfs/partition/cpu_autoscaler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "prepfs/common/json_text.h"

namespace prepfs {
namespace {

CpuControllerConfig bounded(CpuControllerConfig c, unsigned cores) {
  c.max_slots = std::max(1u, cores);
  c.min_slots = std::clamp(c.min_slots, 1u, c.max_slots);
  return c;
}

}  // namespace

CpuAutoscaler::CpuAutoscaler(CpuAutoscalerConfig cfg, const RenderCounters& renders, ApplyFn apply, CpuTimesFn read_cpu)
    : cfg_(cfg),
      renders_(renders),
      apply_(std::move(apply)),
      read_cpu_(std::move(read_cpu)),
      controller_(bounded(cfg.controller, cfg.cores), cfg.start_slots),
      last_tick_(std::chrono::steady_clock::now()),
      last_wait_ns_(load(renders.cpu_wait_ns)),
      last_busy_ns_(load(renders.slot_busy_ns)),
      last_cpu_(read_cpu_()) {
  last_.slots = cfg_.automatic ? controller_.slots() : cfg_.fixed_slots;
  last_.why = cfg_.automatic ? "the first count, before any measurement" : "fixed by cpu=";
  if (cfg_.automatic && apply_) apply_(controller_.slots());
}

void CpuAutoscaler::tick() {
  const auto now = std::chrono::steady_clock::now();
  std::chrono::nanoseconds wall;
  {
    std::lock_guard lock(mu_);
    wall = std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_tick_);
    last_tick_ = now;
  }
  tick_window(wall);
}

void CpuAutoscaler::tick_window(std::chrono::nanoseconds wall) {
  std::optional<CpuDecision> changed;
  {
    std::lock_guard lock(mu_);
    const uint64_t wait_ns = load(renders_.cpu_wait_ns), busy_ns = load(renders_.slot_busy_ns);
    const std::optional<CpuTimes> cpu = read_cpu_();
    CpuWindow w;
    w.wall_s = double(wall.count()) / 1e9;
    w.stall_s = double(wait_ns - std::min(wait_ns, last_wait_ns_)) / 1e9;
    w.busy_s = double(busy_ns - std::min(busy_ns, last_busy_ns_)) / 1e9;
    // Unreadable CPU times count as no idle CPU: the controller then never grows.
    w.idle_cores = cpu && last_cpu_ ? idle_cores(*last_cpu_, *cpu, cfg_.online_cpus) : 0;
    last_wait_ns_ = wait_ns;
    last_busy_ns_ = busy_ns;
    last_cpu_ = cpu;
    last_window_ = w;
    ticks_++;
    if (!cfg_.automatic) return;
    last_ = controller_.step(w);
    if (last_.change != 0) {
      (last_.change > 0 ? grows_ : shrinks_)++;
      last_change_ = last_;
      last_change_tick_ = ticks_;
      changed = last_;
    }
  }
  if (changed) {
    if (apply_) apply_(changed->slots);
    spdlog::info("cpu=auto: {} transform slot(s): {}", changed->slots, changed->why);
  }
}

unsigned CpuAutoscaler::slots() const {
  std::lock_guard lock(mu_);
  return cfg_.automatic ? controller_.slots() : cfg_.fixed_slots;
}

std::string CpuAutoscaler::report_text() const {
  std::lock_guard lock(mu_);
  const CpuWindow& w = last_window_;
  const double wall = w.wall_s > 0 ? w.wall_s : 1;
  std::string s;
  if (cfg_.automatic) {
    s = fmt::format("Transform workers: cpu=auto, {} slot(s) of the machine's {} core(s); {} grow(s), {} shrink(s)\n",
                    controller_.slots(), cfg_.cores, grows_, shrinks_);
    if (last_change_.change != 0)
      s += fmt::format("  last change, {} tick(s) ago: {}\n", ticks_ - last_change_tick_, last_change_.why);
    s += fmt::format("  last tick: {}\n", last_.why);
  } else {
    s = fmt::format("Transform workers: cpu={} (fixed; cpu=auto would size them from the stalls below)\n",
                    cfg_.fixed_slots);
    s += fmt::format("  last tick: renders waited {:.3f} s/s for a slot, {:.2f} slots busy, {:.2f} cores idle\n",
                     w.stall_s / wall, w.busy_s / wall, w.idle_cores);
  }
  return s;
}

std::string CpuAutoscaler::report_json() const {
  std::lock_guard lock(mu_);
  const CpuWindow& w = last_window_;
  const double wall = w.wall_s > 0 ? w.wall_s : 1;
  return fmt::format(
      R"({{"mode": "{}", "slots": {}, "cores": {}, "grows": {}, "shrinks": {}, "stall_s_per_s": {:.6g}, )"
      R"("busy_slots": {:.6g}, "idle_cores": {:.6g}, "why": "{}", "last_change": "{}"}})",
      cfg_.automatic ? "auto" : "fixed", cfg_.automatic ? controller_.slots() : cfg_.fixed_slots, cfg_.cores, grows_,
      shrinks_, w.stall_s / wall, w.busy_s / wall, w.idle_cores, json_escaped(last_.why), json_escaped(last_change_.why));
}

}  // namespace prepfs
