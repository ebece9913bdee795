#include "prepfs/store/render_ahead.h"

#include <spdlog/spdlog.h>

namespace prepfs {

RenderAhead::RenderAhead(SampleStore& store, Renderer& renderer, const JobKnowledge* knowledge,
                         RenderAheadCounters& counters, VariantFn next_variant)
    : store_(store),
      renderer_(renderer),
      knowledge_(knowledge),
      counters_(counters),
      next_variant_(std::move(next_variant)),
      thread_([this] { work(); }) {}

RenderAhead::~RenderAhead() { stop(); }

void RenderAhead::stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void RenderAhead::after_serve(uint32_t node) {
  if (knowledge_ && knowledge_->has_future()) return;  // the prefetcher's work
  // Cheap checks first: a serve under load must not pay for a queue it would only fill.
  if (!renderer_.has_idle_slot()) {
    bump(counters_.skipped);
    return;
  }
  {
    std::lock_guard lock(mu_);
    if (stop_ || queued_.count(node)) return;
    if (queue_.size() >= kMaxQueued) {
      bump(counters_.skipped);
      return;
    }
    queue_.push_back(node);
    queued_.insert(node);
  }
  work_cv_.notify_one();
}

void RenderAhead::drain() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return stop_ || (queue_.empty() && !working_); });
}

void RenderAhead::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    const uint32_t node = queue_.front();
    queue_.pop_front();
    queued_.erase(node);
    working_ = true;
    lock.unlock();
    render_one(node);
    lock.lock();
    working_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
  idle_cv_.notify_all();
}

void RenderAhead::render_one(uint32_t node) {
  ResourceBudget::Hold slot = renderer_.idle_slot();  // held for the whole render ahead
  if (slot.amount() == 0) {
    bump(counters_.skipped);
    return;
  }
  try {
    const Sample s = store_.resolve(node);
    const uint32_t variant = next_variant_(node);
    const AheadOutcome outcome = store_.render_ahead(s, variant, [&] { return next_variant_(node) == variant; });
    switch (outcome) {
      case AheadOutcome::rendered:
      case AheadOutcome::late:
      case AheadOutcome::wasted:
        bump(counters_.rendered);
        bump(counters_.bytes, store_.shapes().augmented_size(s.dims));
        if (outcome == AheadOutcome::late) bump(counters_.late);
        if (outcome == AheadOutcome::wasted) bump(counters_.wasted);
        break;
      case AheadOutcome::skipped:
      case AheadOutcome::no_inputs: bump(counters_.skipped); break;
      case AheadOutcome::ready: break;
    }
  } catch (const std::exception& e) {
    // The open will meet the same error and report it; a render ahead only logs.
    spdlog::debug("render ahead of node {}: {}", node, e.what());
  }
}

}  // namespace prepfs
