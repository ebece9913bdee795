// Render ahead when no order is published (issue 13): after an open of augmented/ serves a file,
// the variant the file's next open will get is rendered on a background thread and staged, so that
// open finds it ready instead of waiting for a render. It costs the readers nothing they would
// notice: it runs only in a cpu slot that is free while no render waits for one
// (Renderer::idle_slot()), only from inputs already in memory (no slot held while the source
// answers), and only into the staging's free room for renders ahead (never evicting anything).
// When a job has published its order the prefetcher renders exactly what comes next instead.
// Rendering ahead never changes what an open gets: the staged entry's key names the file's
// version, the pipeline and the variant, so an open takes it only if it is the variant
// (seed, path, k) defines for that open.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "prepfs/common/stats.h"
#include "prepfs/partition/job_knowledge.h"
#include "prepfs/store/renderer.h"
#include "prepfs/store/sample_store.h"

namespace prepfs {

class RenderAhead {
 public:
  // next_variant(node): the variant the next open of node will serve. knowledge may be null.
  using VariantFn = std::function<uint32_t(uint32_t node)>;
  RenderAhead(SampleStore& store, Renderer& renderer, const JobKnowledge* knowledge, RenderAheadCounters& counters,
              VariantFn next_variant);
  ~RenderAhead();  // stops and joins the thread
  RenderAhead(const RenderAhead&) = delete;
  RenderAhead& operator=(const RenderAhead&) = delete;

  // An open of node was served: queue its next variant, unless the slots are busy or awaited
  // right now, or an order is published.
  void after_serve(uint32_t node);
  void stop();
  // Waits until nothing is queued or rendering (tests: what was queued has been done).
  void drain();

  static constexpr size_t kMaxQueued = 64;  // more serves than this waiting: the slots are not idle

 private:
  void work();
  void render_one(uint32_t node);

  SampleStore& store_;
  Renderer& renderer_;
  const JobKnowledge* knowledge_;
  RenderAheadCounters& counters_;
  VariantFn next_variant_;

  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<uint32_t> queue_;
  std::unordered_set<uint32_t> queued_;
  bool working_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace prepfs
