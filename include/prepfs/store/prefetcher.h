// Exact prefetch from the published orders (NoPFS-style): a coordinator walks each job's
// upcoming accesses from its cursor and hands them to workers, which fetch (raw), decode
// (decoded, while a CPU slot is free) or render the variant the next open will get (augmented:
// its inputs fetched first, then rendered in a CPU slot nobody waits for) through the store.
// Work stays within two bounds: at most `max_in_flight` prefetches at once, and at most
// `window_bytes` prefetched ahead of the jobs' cursors and not read yet.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "prepfs/common/stats.h"
#include "prepfs/partition/job_knowledge.h"
#include "prepfs/store/sample_store.h"
#include "prepfs/store/staging.h"

namespace prepfs {

struct PrefetchConfig {
  uint64_t window_bytes = 256ull << 20;  // staged + in flight
  unsigned max_in_flight = 16;           // concurrent prefetches (source requests, renders)
  size_t lookahead = 4096;               // accesses per job considered each round
  // A job that has neither read nor published for this long (killed without ending its order, or
  // paused) holds none of the window and gets nothing prefetched until it reads again; else a
  // dead job's charges, never read, would hold the window from every other job.
  std::chrono::milliseconds idle_after{std::chrono::seconds(30)};
};

class Prefetcher {
 public:
  // variant_of(node, later): the augmented variant the open of node `later` opens after the next
  // will serve (0: the next open).
  using VariantFn = std::function<uint32_t(uint32_t node, uint32_t later)>;
  Prefetcher(SampleStore& store, JobKnowledge& knowledge, Staging& staging, Renderer& renderer, PrefetchConfig cfg,
             PrefetchCounters& counters, VariantFn variant_of);
  ~Prefetcher();  // stops and joins the threads
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  void wake();  // an order was published or reads advanced: look for work now
  void stop();

 private:
  struct Task {
    Access access;
    uint32_t variant;
    uint64_t bytes;  // the window charge
  };
  void coordinate();
  void round();
  void work();
  uint64_t estimate(const Sample& s, Form form) const;
  uint64_t prefetch_variant(Sample s, uint32_t variant);
  ResourceBudget::Hold idle_slot_while(const std::function<bool()>& upcoming);
  uint64_t outstanding_bytes() const;

  SampleStore& store_;
  JobKnowledge& knowledge_;
  Staging& staging_;
  Renderer& renderer_;
  PrefetchConfig cfg_;
  PrefetchCounters& counters_;
  VariantFn variant_of_;

  // The coordinator's own (only its thread touches them).
  std::map<std::string, uint64_t> frontier_;  // per job: the next position not looked at yet
  std::map<std::string, std::deque<std::pair<uint64_t, uint64_t>>> outstanding_;  // (position, bytes) not read yet
  struct Moved {
    uint64_t activity;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, Moved> moved_;  // per job: its activity, and when it last grew (or the job came)
  std::set<std::string> idle_;          // this round's idle jobs (their charges are out of the window)

  std::mutex mu_;
  std::condition_variable wake_cv_, work_cv_;
  std::deque<Task> queue_;
  // Queued or in flight: (node, form, variant). The variant is part of it: the task of a variant
  // whose open has passed may still be finishing when the next epoch's access of the file comes,
  // and a round passes an access it finds claimed for good.
  std::set<std::tuple<uint32_t, Form, uint32_t>> claimed_;
  unsigned in_flight_ = 0;                       // queued + running
  bool woken_ = false;
  bool stop_ = false;
  std::thread coordinator_;
  std::vector<std::thread> workers_;
};

}  // namespace prepfs
