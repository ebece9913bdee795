#include "prepfs/partition/planner.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "prepfs/model/drift.h"

namespace prepfs {
namespace {

std::string placement_text(const model::Placement& p) {
  std::string s;
  for (Form f : kAllForms)
    s += fmt::format("{}{} {:.0f}/{:.0f}", s.empty() ? "" : ", ", form_name(f), p.at(f, Tier::ram), p.at(f, Tier::ssd));
  return s + " (ram/ssd)";
}

std::string placement_json(const model::Placement& p) {
  std::string s = "{";
  for (Form f : kAllForms)
    s += fmt::format(R"({}"{}": {{"ram": {:.0f}, "ssd": {:.0f}}})", f == Form::raw ? "" : ", ", form_name(f),
                     p.at(f, Tier::ram), p.at(f, Tier::ssd));
  return s + "}";
}

// JSON has no infinity: an unconstrained rate is null.
// Nine significant digits: enough for a reader to recompute the model from the inputs printed
// (the bench harness does; test_partition checks it agrees).
std::string number(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : "null"; }

}  // namespace

Planner::Planner(PlannerConfig cfg, InputsFn inputs, Placer& placer, TierManager& cache, DropFn drop,
                 const CpuAutoscaler* cpu, ServedFn served)
    : cfg_(cfg),
      inputs_(std::move(inputs)),
      drop_(std::move(drop)),
      placer_(placer),
      cache_(cache),
      cpu_(cpu),
      served_(std::move(served)) {}

model::Inputs Planner::planning_inputs(const model::Inputs& measured) const {
  model::Inputs in = measured;
  // The recent fills use what the placement leaves of the whole budget, less the files that are
  // not samples (the RAM tier holds those too).
  in.ram_budget = std::max(0.0, measured.ram_capacity - cfg_.other_bytes);
  in.ram_capacity = std::max(0.0, measured.ram_capacity * cfg_.headroom - cfg_.other_bytes);
  in.ssd_capacity = std::max(0.0, measured.ssd_capacity * cfg_.headroom - cfg_.other_bytes);
  return in;
}

// Whether a plan for these inputs keeps each variant beside its decoded pixels in RAM (the
// Placer holds the enforced answer; with no samples there is nothing to place beside).
bool Planner::beside_pixels(const model::Inputs& planning) {
  return planning.samples > 0 && planning.variant_beside_pixels();
}

std::vector<Planner::Move> Planner::moves_between(const Placer::Layout& from, const Placer::Layout& to) const {
  std::vector<Move> moves;
  if (from != to)
    placer_.for_each_moved(from, to, [&](uint32_t node, std::optional<Slot> was, std::optional<Slot> is) {
      moves.push_back({node, was, is});
    });
  return moves;
}

void Planner::keep(const model::Inputs& planning, Refills refills, bool beside_changed) {
  // On a complete index the count the slots were laid out for was a guess: lay them out for the
  // real one (the samples that changed slot move unweighed, as the plan would have moved them).
  if (refills == Refills::ignore) {
    if (beside_changed || Placer::layout_for(enforced_, planning.samples) != placer_.layout())
      enforce(enforced_, planning);
    return;
  }
  if (!beside_changed) return;
  // Otherwise the slots stay laid out for the count they were made for, so that no sample moves
  // without the payback check; the shares and the admission follow the new answer.
  model::Inputs laid = planning;
  laid.samples = enforced_samples_;
  enforce(enforced_, laid);
}

void Planner::enforce(const model::Placement& p, const model::Inputs& planning, const std::vector<Move>* moves) {
  enforced_ = p;
  enforced_samples_ = planning.samples;
  const bool beside = beside_pixels(planning);
  // No images, no samples: nothing to partition, every file is cached as read.
  if (planning.samples <= 0) {
    placer_.set_variant_beside_pixels(beside);
    return;
  }
  const Placer::Layout before = placer_.layout();
  const bool first = status_.plans == 1;
  placer_.set(p, planning.samples);
  // The samples that changed slot: their old entries go now (the new slot fills as they are read).
  if (!first && before != placer_.layout()) {
    std::vector<Move> own;
    if (!moves) {
      own = moves_between(before, placer_.layout());
      moves = &own;
    }
    for (const Move& m : *moves) {
      status_.moved_samples++;
      if (m.was && drop_) drop_(m.node, m.was->form);
    }
  }
  std::array<std::array<double, kForms>, kTiers> shares{};
  for (Tier t : kAllTiers) {
    const double budget = double(cache_.stats(t).budget);
    if (budget <= 0) continue;
    for (Form f : kAllForms) {
      double bytes = p.at(f, t) * planning.size_of(f) / cfg_.headroom;
      // The variants kept beside decoded pixels in RAM count in the augmented share.
      if (f == Form::augmented && t == Tier::ram && beside)
        bytes += p.at(Form::decoded, Tier::ram) * planning.size_of(Form::augmented) / cfg_.headroom;
      // Room for the files that are not samples, with the SSD's 64-byte header per chunk.
      if (f == Form::raw) bytes += cfg_.other_bytes * 1.01 + 65536;
      shares[size_t(t)][size_t(f)] = std::min(1.0, bytes / budget);
    }
  }
  cache_.set_partition(shares[0], shares[1]);
  // After the shares: the store admits variants beside pixels only once the room is there.
  placer_.set_variant_beside_pixels(beside);
}

bool Planner::move_pays(const model::Inputs& planning, const std::vector<Move>& moves, double now, double better,
                        std::string* why) {
  // What moving costs over keeping the placement: `better` counts a hit for every sample the new
  // placement gives a slot, but a sample it moves there misses once first, unless keeping would
  // have cost that miss too (its old slot serves the view and is not filled yet). So: the
  // resident samples it takes from a slot the view is served from (their entries are dropped),
  // the samples whose old slot the view cannot use (after a view change), and those that had no
  // slot. A sample it takes out of every slot is a miss in `better` already.
  uint64_t refills = 0;
  for (const Move& m : moves) {
    if (!m.is) continue;
    // raw serves every view, decoded pixels serve decoded/ and augmented/
    const bool serves = m.was && m.was->form <= planning.view;
    if (!serves || cache_.residency().resident(m.node)) refills++;
  }
  status_.last_refills = refills;
  // Seconds per request: a miss costs about what caching nothing does (the model's "no cache"
  // alternative); the time the new placement saves is per request over an epoch of N.
  auto per_request = [](double rate) { return rate > 0 && std::isfinite(rate) ? 1 / rate : 0.0; };
  const double none = plan_.alternatives.empty() ? 0 : plan_.alternatives[0].prediction.throughput;
  const double cost = double(refills) * std::max(0.0, per_request(none) - per_request(better));
  // The horizon: a job that has served E epochs is taken to run about E more, and at least
  // payback_epochs.
  const double served = epochs_served(planning.samples);
  const double horizon = std::max(cfg_.payback_epochs, served);
  const double per_epoch = planning.samples * (per_request(now) - per_request(better));
  *why = fmt::format(
      "it saves {:.3f} s per epoch; the first reads of the {} samples it gives a new slot cost {:.3f} s more "
      "(more than {:.1f} epochs of the saving; {:.1f} served so far)",
      per_epoch, refills, cost, horizon, served);
  return per_epoch * horizon >= cost;
}

double Planner::epochs_served(double samples) const { return served_ && samples > 0 ? served_() / samples : 0.0; }

void Planner::replan_locked(const model::Inputs& measured, const std::string& reason, Refills refills) {
  declined_at_.reset();
  const model::Inputs planning = planning_inputs(measured);
  plan_ = model::solve(planning);
  planned_ = measured;
  last_plan_ = std::chrono::steady_clock::now();
  status_.plans++;
  status_.last_reason = reason;
  model::Placement next = cfg_.fixed ? model::fixed_placement(planning, cfg_.fixed_shares) : plan_.placement;
  const bool first = status_.plans == 1;
  // The shares also depend on whether variants ride beside decoded pixels (the view, aug_reuse).
  const bool beside_changed = beside_pixels(planning) != placer_.variant_beside_pixels();
  std::optional<std::vector<Move>> moves;  // when weighed: the samples `next` moves
  // A placement is kept only while it fits the whole budgets (the headroom aside) and the count:
  // entries that grew can leave it too big, and one that caches more than fits predicts more
  // than any plan that does, so it would be kept for good while the quotas refuse its samples.
  model::Inputs whole = planning;
  whole.ram_capacity = std::max(0.0, measured.ram_capacity - cfg_.other_bytes);
  whole.ssd_capacity = std::max(0.0, measured.ssd_capacity - cfg_.other_bytes);
  const bool enforced_fits = model::feasible(whole, enforced_, 1e-9);
  if (!first && !cfg_.fixed && !enforced_fits)
    spdlog::info("partition: {} no longer fits the budgets ({}); replacing it", placement_text(enforced_), reason);
  if (!first && !cfg_.fixed && enforced_fits) {
    // Keep the enforced placement unless the new one is clearly better under the new inputs.
    const double now = model::predict(planning, enforced_).throughput;
    const double better = model::predict(planning, next).throughput;
    if (!(better > now * (1 + cfg_.min_gain))) {
      spdlog::info(
          "partition: re-planned ({}); keeping {}: the new optimum predicts {:.1f} samples/s, not {:.0f}% above "
          "the current {:.1f}",
          reason, placement_text(enforced_), better, cfg_.min_gain * 100, now);
      keep(planning, refills, beside_changed);
      return;
    }
    moves = moves_between(placer_.layout(), Placer::layout_for(next, planning.samples));
    std::string why;
    if (refills == Refills::weigh && !move_pays(planning, *moves, now, better, &why)) {
      status_.unpaid_moves++;
      declined_at_ = epochs_served(planning.samples);
      spdlog::info(
          "partition: re-planned ({}); keeping {}: the new optimum predicts {:.1f} samples/s against {:.1f}, "
          "but {}",
          reason, placement_text(enforced_), better, now, why);
      keep(planning, refills, beside_changed);
      return;
    }
  }
  if (first || next.n != enforced_.n || beside_changed) {
    if (!first) status_.moves++;
    enforce(next, planning, moves ? &*moves : nullptr);
  }
  const model::Prediction pr = model::predict_with_free_room(planning, enforced_);
  spdlog::info("partition ({}): {}: {}, predicted {:.1f} samples/s (the placement alone {:.1f}), bound by {}",
               cfg_.fixed ? "fixed" : "auto", reason, placement_text(enforced_), pr.throughput,
               model::predict(planning, enforced_).throughput, model::resource_name(pr.binding));
}

void Planner::plan_now(const std::string& reason) {
  model::Inputs measured = inputs_(nullptr);
  std::lock_guard lock(mu_);
  replan_locked(measured, reason);
}

void Planner::plan_with_complete_index(const std::string& reason, bool restarted_over_saved_index,
                                       double other_bytes) {
  model::Inputs measured = inputs_(nullptr);
  std::lock_guard lock(mu_);
  cfg_.other_bytes = other_bytes;
  // Only early in a first mount's job. A raw/ reader completes the index as it reads each file's
  // first chunk, near the end of its first epoch, when the cache holds samples measured plans
  // placed; a restart's SSD holds what the last mount's measured plans chose.
  const bool guessed_cache = !restarted_over_saved_index && epochs_served(measured.samples) < kGuessedCacheEpochs;
  replan_locked(measured, reason, guessed_cache ? Refills::ignore : Refills::weigh);
}

void Planner::on_tick() {
  model::Inputs measured = inputs_(nullptr);
  std::lock_guard lock(mu_);
  // The plan made at mount stands on priors: replace it as soon as measurements differ; after
  // that, at most one plan per min_interval.
  if (status_.plans > 1 && std::chrono::steady_clock::now() - last_plan_ < cfg_.min_interval) return;
  model::Drift d = model::detect_drift(planned_, measured, cfg_.drift_threshold);
  if (status_.plans > 0 && !d.drifted) {
    // A plan declined as not worth its refills is weighed again once the horizon (max(payback
    // epochs, epochs served)) has grown by an epoch: without it only a drift would, and a job on
    // steady inputs would keep the worse placement to its end.
    const double served = epochs_served(measured.samples);
    if (declined_at_ && served >= std::max(*declined_at_, cfg_.payback_epochs) + 1)
      replan_locked(measured, fmt::format("a declined plan weighed again, {:.1f} epochs served", served));
    return;
  }
  replan_locked(measured, status_.plans == 0 ? std::string("first plan")
                                             : fmt::format("{} changed by {:.0f}%", d.input, d.change * 100));
}

Planner::Status Planner::status() const {
  std::lock_guard lock(mu_);
  Status s = status_;
  s.enforced = enforced_;
  return s;
}

std::string Planner::report_text() {
  std::string notes;
  const model::Inputs measured = inputs_(&notes);
  std::lock_guard lock(mu_);
  const model::Inputs now = planning_inputs(measured);
  model::Plan shown = model::solve(now);  // what auto would choose with today's inputs
  const std::string optimum = placement_text(shown.placement);
  shown.placement = enforced_;  // the report is about what this mount enforces
  shown.prediction = model::predict(now, enforced_);
  std::string head;
  if (cfg_.fixed) {
    shown.caching_helps = true;  // the user's choice: "cannot help" would describe the optimum, not it
    head = "prepfs plan: partition=fixed (enforced as below; `partition=auto` would choose " + optimum + ")\n";
  } else {
    head = fmt::format(
        "prepfs plan: partition=auto, {} plan(s), {} move(s) ({} samples moved), {} better plan(s) not worth their "
        "refills{}; last: {}\n",
        status_.plans, status_.moves, status_.moved_samples, status_.unpaid_moves,
        status_.last_refills ? fmt::format(" (the last move weighed would refill {} samples)", *status_.last_refills)
                             : std::string(),
        status_.last_reason);
  }
  return head +
         fmt::format("budgets planned at {:.0f}% (entry sizes vary around their means)\n\n", cfg_.headroom * 100) +
         model::explain(now, shown) + (notes.empty() ? "" : "\nAssumptions about inputs:\n" + notes) +
         (cpu_ ? "\n" + cpu_->report_text() : "");
}

std::string Planner::report_json() {
  std::string notes;
  const model::Inputs measured = inputs_(&notes);
  std::lock_guard lock(mu_);
  const model::Inputs now = planning_inputs(measured);
  const model::Plan optimal = model::solve(now);
  const model::FreeRoom fr = model::free_room(now, enforced_);
  const model::Prediction pr = model::predict_with_free_room(now, enforced_, fr);
  const model::Prediction alone = model::predict(now, enforced_);
  std::string inputs = "{";
  for (const model::NamedInput& n : model::named_inputs(measured))
    inputs += fmt::format(R"({}"{}": {})", inputs.size() > 1 ? ", " : "", n.name, number(n.value));
  inputs += fmt::format(R"(, "view": "{}"}})", form_name(measured.view));
  std::string rates = "{";
  for (size_t r = 0; r < model::kResources; r++)
    rates += fmt::format(R"({}"{}": {})", r ? ", " : "", model::resource_name(static_cast<model::Resource>(r)),
                         number(pr.rate[r]));
  rates += "}";
  std::string alts = "{";
  for (const model::Alternative& a : optimal.alternatives)
    alts += fmt::format(R"({}"{}": {})", alts.size() > 1 ? ", " : "", a.name, number(a.prediction.throughput));
  alts += "}";
  return fmt::format(
      "{{\"mode\": \"{}\", \"plans\": {}, \"moves\": {}, \"moved_samples\": {}, \"unpaid_moves\": {}, "
      "\"last_refills\": {}, \"last_reason\": \"{}\", \"headroom\": "
      "{}, \"other_bytes\": {},\n"
      " \"inputs\": {},\n"
      " \"placement\": {},\n"
      " \"predicted\": {}, \"binding\": \"{}\", \"rates\": {},\n"
      " \"placement_alone\": {{\"predicted\": {}, \"binding\": \"{}\"}},\n"
      " \"free_room\": {{\"bytes\": {}, \"touched_per_request\": {}, \"variant_survival\": {}, "
      "\"decoded_survival\": {}, \"raw_survival\": {}, \"refill_raw_survival\": {}, \"renders_per_request\": {}}},\n"
      " \"alternatives\": {},\n{}"
      " \"optimal\": {{\"placement\": {}, \"predicted\": {}, \"binding\": \"{}\", \"caching_helps\": {}}}}}\n",
      cfg_.fixed ? "fixed" : "auto", status_.plans, status_.moves, status_.moved_samples, status_.unpaid_moves,
      status_.last_refills ? std::to_string(*status_.last_refills) : "null", status_.last_reason, cfg_.headroom,
      number(cfg_.other_bytes), inputs, placement_json(enforced_), number(pr.throughput),
      model::resource_name(pr.binding), rates, number(alone.throughput), model::resource_name(alone.binding),
      number(fr.room), number(fr.touched), number(fr.variant_survival), number(fr.decoded_survival),
      number(fr.raw_survival), number(fr.refill_raw_survival), number(fr.renders), alts,
      cpu_ ? " \"cpu\": " + cpu_->report_json() + ",\n" : std::string(), placement_json(optimal.placement),
      number(optimal.prediction.throughput), model::resource_name(optimal.prediction.binding),
      optimal.caching_helps ? "true" : "false");
}

}  // namespace prepfs
