#include "prepfs/store/prefetcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

namespace prepfs {
namespace {

void raise_to(std::atomic<uint64_t>& peak, uint64_t v) {
  uint64_t cur = peak.load(std::memory_order_relaxed);
  while (v > cur && !peak.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

Prefetcher::Prefetcher(SampleStore& store, JobKnowledge& knowledge, Staging& staging, Renderer& renderer,
                       PrefetchConfig cfg, PrefetchCounters& counters, VariantFn variant_of)
    : store_(store),
      knowledge_(knowledge),
      staging_(staging),
      renderer_(renderer),
      cfg_(cfg),
      counters_(counters),
      variant_of_(std::move(variant_of)) {
  cfg_.max_in_flight = std::max(1u, cfg_.max_in_flight);
  for (unsigned i = 0; i < cfg_.max_in_flight; i++) workers_.emplace_back([this] { work(); });
  coordinator_ = std::thread([this] { coordinate(); });
}

Prefetcher::~Prefetcher() { stop(); }

void Prefetcher::stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  wake_cv_.notify_all();
  work_cv_.notify_all();
  coordinator_.join();
  for (auto& t : workers_) t.join();
}

void Prefetcher::wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  wake_cv_.notify_one();
}

uint64_t Prefetcher::estimate(const Sample& s, Form form) const {
  if (!s.is_sample || form == Form::raw) return s.version.size;
  return form == Form::decoded ? store_.shapes().decoded_size(s.dims) : store_.shapes().augmented_size(s.dims);
}

uint64_t Prefetcher::outstanding_bytes() const {
  uint64_t total = 0;
  for (const auto& [job, items] : outstanding_)
    if (!idle_.count(job))
      for (const auto& [pos, bytes] : items) total += bytes;
  return total;
}

// The window is what was prefetched for a job and not read yet: per job, the issued accesses it
// has not read and that are not behind its cursor (see the charges below). A round walks each job's accesses from where
// the last round stopped (its frontier), round-robin across jobs, and queues those not ready until
// a bound is reached.
void Prefetcher::round() {
  std::vector<JobAhead> jobs = knowledge_.upcoming(frontier_, cfg_.lookahead);
  const auto now = std::chrono::steady_clock::now();
  std::map<std::string, uint64_t> live;
  idle_.clear();
  std::vector<size_t> next(jobs.size(), 0);
  for (size_t ji = 0; ji < jobs.size(); ji++) {
    const JobAhead& j = jobs[ji];
    live[j.name] = 0;
    // A charge goes once its access is read, or is behind the job's cursor: a reset dropped it, or
    // the job read far past it and it counts as read unseen (the page cache answered it: see
    // JobKnowledge::note_access).
    auto& items = outstanding_[j.name];
    if (!items.empty()) {
      std::vector<uint64_t> positions;
      positions.reserve(items.size());
      for (const auto& item : items) positions.push_back(item.first);
      const std::vector<bool> gone = knowledge_.passed(j.name, positions);
      std::deque<std::pair<uint64_t, uint64_t>> kept;
      for (size_t i = 0; i < items.size(); i++)
        if (!gone[i]) kept.push_back(items[i]);
      items.swap(kept);
    }
    auto [m, came] = moved_.try_emplace(j.name, Moved{j.activity, now});
    if (!came && m->second.activity != j.activity) m->second = {j.activity, now};
    if (now - m->second.at >= cfg_.idle_after) {
      // Idle: it waits its turn, and its charges leave the window until it reads again. They are
      // kept: what was staged for it is still there for its reads, and a window ahead of them on
      // resuming would push it out of the staging.
      idle_.insert(j.name);
      next[ji] = j.ahead.size();
    }
  }
  auto forget_ended = [&](auto& per_job) {
    for (auto it = per_job.begin(); it != per_job.end();) it = live.count(it->first) ? std::next(it) : per_job.erase(it);
  };
  forget_ended(outstanding_);
  forget_ended(frontier_);
  forget_ended(moved_);

  uint64_t window = outstanding_bytes();
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t ji = 0; ji < jobs.size(); ji++) {
      JobAhead& j = jobs[ji];
      if (next[ji] >= j.ahead.size()) continue;
      {
        std::lock_guard lock(mu_);
        if (in_flight_ >= cfg_.max_in_flight) return;
      }
      if (window >= cfg_.window_bytes) return;
      const auto& [pos, a, earlier] = j.ahead[next[ji]];
      const Sample s = store_.resolve(a.node);
      // The variant of the open `earlier` opens after the file's next. An open landing between
      // the job's snapshot and this read (its count of opens moves before its access is consumed)
      // makes it one too high: that render is staged for a later open or wasted, and this access
      // is rendered on demand. Never a wrong serve: the key names the variant.
      const uint32_t variant = a.form == Form::augmented ? variant_of_(a.node, earlier) : 0;
      bool claimed;
      {
        std::lock_guard lock(mu_);
        claimed = claimed_.count({a.node, a.form, variant}) != 0;
      }
      if (!claimed && !store_.ready(s, a.form, variant)) {
        const uint64_t bytes = estimate(s, a.form);
        if (window > 0 && window + bytes > cfg_.window_bytes) return;
        window += bytes;
        outstanding_[j.name].emplace_back(pos, bytes);
        std::lock_guard lock(mu_);
        claimed_.insert({a.node, a.form, variant});
        in_flight_++;
        queue_.push_back(Task{a, variant, bytes});
        raise_to(counters_.max_in_flight, in_flight_);
        raise_to(counters_.max_window_bytes, window);
        work_cv_.notify_one();
      }
      frontier_[j.name] = pos + 1;
      next[ji]++;
      progress = true;
    }
  }
}

void Prefetcher::coordinate() {
  uint64_t seen = ~0ull;
  std::unique_lock lock(mu_);
  while (!stop_) {
    // While orders are pending, reads move the jobs' cursors without waking us (the read path
    // stays free of it): look every 5 ms. With nothing pending, sleep until an order comes: an
    // idle mount woke here 200 times a second for nothing.
    const auto called = [&] { return stop_ || woken_; };
    if (knowledge_.has_future())
      wake_cv_.wait_for(lock, std::chrono::milliseconds(5), called);
    else
      wake_cv_.wait(lock, called);
    if (stop_) break;
    const bool woken = woken_;
    woken_ = false;
    const uint64_t progress = knowledge_.progress();
    if (!woken && progress == seen) continue;  // nothing published, read or finished since
    seen = progress;
    lock.unlock();
    round();
    lock.lock();
  }
}

// A cpu slot nobody waits for (the readers' renders come first). Until one is idle the task
// waits, as long as its open is still ahead: an open that comes first renders the variant itself.
// An empty hold when the open came or the prefetcher stops. The wait sleeps until a slot comes
// back idle; it looks at the open and the stop every 20 ms. (It used to poll every 1 ms: 16
// waiting tasks burnt 6-9% of a core while the readers kept every slot busy, exactly when the
// cores are short: bench/prefetch_wait.)
ResourceBudget::Hold Prefetcher::idle_slot_while(const std::function<bool()>& upcoming) {
  ResourceBudget::Hold slot = renderer_.idle_slot();
  if (slot.amount() > 0) return slot;
  bump(counters_.slot_waits);
  const uint64_t t0 = steady_ns();
  while ((slot = renderer_.idle_slot(std::chrono::milliseconds(20))).amount() == 0) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
    }
    if (!upcoming()) break;
  }
  bump(counters_.slot_wait_ns, steady_ns() - t0);
  return slot;
}

// The variant the access's open will get: its inputs first, with no cpu slot held while the
// source answers; then the render in an idle slot. The inputs may be gone by then (a re-plan moved
// the sample, an eviction made room): they are fetched again, a few times at most, because the
// coordinator has moved past this access and would not come back to it.
uint64_t Prefetcher::prefetch_variant(Sample s, uint32_t variant) {
  if (!s.dims.known()) {  // a lazy first mount has not read this header yet
    store_.probe_head(s);
    s = store_.resolve(s.node);
  }
  const uint32_t node = s.node;
  auto upcoming = [&] { return variant_of_(node, 0) <= variant; };  // no open has served it yet
  constexpr int kFetches = 3;
  uint64_t got = 0;
  for (int fetch = 0; fetch < kFetches; fetch++) {
    if (fetch > 0) {
      bump(counters_.refetched);
      s = store_.resolve(node);  // the slot as it is now: a re-plan may have moved the sample meanwhile
    }
    if (!store_.inputs_at_hand(s, variant)) got += store_.prefetch(s, Form::raw, false);
    const ResourceBudget::Hold slot = idle_slot_while(upcoming);
    if (slot.amount() == 0) break;
    const SampleStore::Early e = store_.prefetch_variant(s, variant, upcoming);
    if (e.outcome != AheadOutcome::no_inputs) return got + e.bytes;
  }
  return got;
}

void Prefetcher::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Task t = queue_.front();
    queue_.pop_front();
    lock.unlock();
    try {
      const Sample s = store_.resolve(t.access.node);
      const uint64_t got = t.access.form == Form::augmented
                               ? prefetch_variant(s, t.variant)
                               : store_.prefetch(s, t.access.form, renderer_.has_idle_slot());
      if (got > 0) {
        bump(counters_.prefetched);
        bump(counters_.bytes, got);
      }
    } catch (const std::exception& e) {
      // The read will meet the same error and report it; a prefetch only logs.
      spdlog::debug("prefetch of node {}: {}", t.access.node, e.what());
    }
    lock.lock();
    in_flight_--;
    claimed_.erase({t.access.node, t.access.form, t.variant});
    woken_ = true;
    wake_cv_.notify_one();
  }
}

}  // namespace prepfs
