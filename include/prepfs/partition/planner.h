// partition=auto and partition=fixed at run time: turns the model's placement into what the cache
// admits (Placer) and how much of each tier each form may hold (TierManager quotas), re-plans when
// the measured inputs drift, and reports the plan (.prepfs/plan, .prepfs/plan.json), with the
// transform workers' count (cpu=, CpuAutoscaler) and why.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/model/inputs.h"
#include "prepfs/model/solver.h"
#include "prepfs/partition/cpu_autoscaler.h"
#include "prepfs/partition/placer.h"

namespace prepfs {

struct PlannerConfig {
  bool fixed = false;  // partition=fixed: enforce fixed_shares instead of solving
  std::array<std::array<double, kForms>, kTiers> fixed_shares{};  // [tier][form]
  // Re-plan when an input moved by more than this (relative), at most once per min_interval.
  double drift_threshold = 0.3;
  std::chrono::milliseconds min_interval{5000};
  // A new plan replaces the enforced one only when it predicts at least this much more
  // throughput with the new inputs: vertex solutions can jump between near-equal placements on
  // small input noise, and every move costs refills.
  double min_gain = 0.03;
  // ... and only when what it saves pays for the refills within max(payback_epochs, the epochs
  // served so far): a move drops the entries of every resident sample it reassigns, each a miss
  // at its next read. Noisy inputs (an SSD's bandwidth measured over a second) otherwise move a
  // settled cache for a gain the model only thinks it sees. A job that has run E epochs is
  // taken to run about E more, so a late, large gain still moves.
  double payback_epochs = 2;
  // Plans use this share of each budget: entry sizes vary around their means, and the quotas
  // (plan bytes / headroom) must hold what the hash assignment actually picks.
  double headroom = 0.95;
  // Bytes of files that are not samples (labels, metadata), always admitted as raw: the raw
  // quotas leave room for them.
  double other_bytes = 0;
};

class Planner {
 public:
  // inputs(notes) returns the measured model inputs (priors stated in *notes where unmeasured).
  using InputsFn = std::function<model::Inputs(std::string* notes)>;
  // Drops the cached entries of one sample's form (its old slot, after a move): without that, a
  // sample the new placement keeps elsewhere would hold its old slot's bytes until evicted, and
  // the samples newly assigned there would find the quota full.
  using DropFn = std::function<void(uint32_t node, Form form)>;
  // Samples served through the views since mount (the payback horizon grows with it).
  using ServedFn = std::function<double()>;
  // cpu (may be null): the transform workers' count and why, shown in the reports.
  Planner(PlannerConfig cfg, InputsFn inputs, Placer& placer, TierManager& cache, DropFn drop = nullptr,
          const CpuAutoscaler* cpu = nullptr, ServedFn served = nullptr);

  // Plans now, whatever the drift (at mount).
  void plan_now(const std::string& reason);
  // The same, once a lazy first mount has read every image header: the placement enforced so far
  // was planned on a guessed sample count and mean sizes, and what it cached is mostly those
  // header reads' first chunks, not samples a measured plan chose. So a plan at least min_gain
  // better replaces it without weighing refills (the payback rule protects a cache a measured
  // plan filled), and a kept one is laid out for the real count. Only while the job has served
  // fewer than kGuessedCacheEpochs: later the cache holds served samples, and refills are weighed.
  // Nor after a restart over a saved partial index (`restarted_over_saved_index`, whether the index
  // was reused or the source rescanned): its SSD holds what the last mount's measured plans
  // chose. other_bytes: PlannerConfig::other_bytes, now that every header is known (at mount only
  // the files whose headers were read could be counted).
  void plan_with_complete_index(const std::string& reason, bool restarted_over_saved_index, double other_bytes);
  static constexpr double kGuessedCacheEpochs = 0.5;
  // Called periodically: re-plans when the inputs drifted past the threshold.
  void on_tick();

  std::string report_text();
  std::string report_json();

  struct Status {
    uint64_t plans = 0;          // plans computed (the first one included)
    uint64_t moves = 0;          // plans that changed the enforced placement
    uint64_t moved_samples = 0;  // samples whose (form, tier) those moves changed
    uint64_t unpaid_moves = 0;   // weighings that declined a better plan: it would not pay for its
                                 // refills (a declined plan weighed again and declined counts again)
    // First misses the last weighed move counted, made or declined (none: no move weighed yet).
    std::optional<uint64_t> last_refills;
    std::string last_reason;
    model::Placement enforced;
  };
  Status status() const;

 private:
  model::Inputs planning_inputs(const model::Inputs& measured) const;  // budgets x headroom
  // A sample whose slot a new layout changes (nullopt: no slot).
  struct Move {
    uint32_t node;
    std::optional<Slot> was, is;
  };
  // One pass over the samples (it hashes every path): both the payback check and enforce use it.
  std::vector<Move> moves_between(const Placer::Layout& from, const Placer::Layout& to) const;
  // `moves`: the samples `p` moves, when the caller has them already (else computed here).
  void enforce(const model::Placement& p, const model::Inputs& planning, const std::vector<Move>* moves = nullptr);
  static bool beside_pixels(const model::Inputs& planning);
  enum class Refills { weigh, ignore };  // whether a move must pay for them (move_pays)
  void keep(const model::Inputs& planning, Refills refills, bool beside_changed);  // the enforced placement
  void replan_locked(const model::Inputs& measured, const std::string& reason, Refills refills = Refills::weigh);
  // Whether moving from the enforced placement by `moves` pays for its refills (payback_epochs);
  // *why says what it weighed, and status_.last_refills the first misses it counted.
  bool move_pays(const model::Inputs& planning, const std::vector<Move>& moves, double now, double better,
                 std::string* why);
  double epochs_served(double samples) const;  // samples served / N (0 without a ServedFn)

  PlannerConfig cfg_;
  InputsFn inputs_;
  DropFn drop_;
  Placer& placer_;
  TierManager& cache_;
  const CpuAutoscaler* cpu_;
  ServedFn served_;
  mutable std::mutex mu_;
  model::Inputs planned_;  // measured inputs of the last plan (the drift baseline)
  model::Plan plan_;       // the solver's answer at the last plan (in fixed mode: for reference)
  model::Placement enforced_;
  double enforced_samples_ = 0;  // the sample count the enforced slots are laid out for
  Status status_;
  std::chrono::steady_clock::time_point last_plan_{};
  // The epochs served when the last plan was declined as not worth its refills (none: the last
  // plan was not). The horizon grows with the epochs served, so on_tick weighs it again later.
  std::optional<double> declined_at_;
};

}  // namespace prepfs
