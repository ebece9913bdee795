// Produces the bytes of decoded/ and augmented/ files through the cache: a decoded file is
// rendered once and cached; augmented variant k of a file is cached under its variant number.
// Each render starts from the cheapest form at hand: an augmented variant from cached decoded
// pixels when they are in a tier (no JPEG decode at all), else from cached or fetched raw bytes.
// Transforms run under a `cpu` budget: at most that many at once, whatever the FUSE thread count.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <semaphore>
#include <unordered_set>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/core/placer.h"
#include "prepfs/core/tree.h"
#include "prepfs/source/source.h"
#include "prepfs/transform/augment.h"
#include "prepfs/transform/encoders.h"
#include "prepfs/transform/pipeline_spec.h"

namespace prepfs {

struct RenderConfig {
  transform::OutputFormat format = transform::OutputFormat::kPpm;
  transform::PipelineSpec spec;
  transform::AugmentOptions augment;  // pixel limits and fast paths
  uint64_t seed = 0;
  unsigned cpu = 1;                   // concurrent transforms
  uint64_t chunk_size = 1ull << 20;   // raw chunking, as DataFs caches raw files
};

struct RenderCounters {
  std::atomic<uint64_t> decoded{0};          // decoded files rendered
  std::atomic<uint64_t> augmented{0};        // augmented variants rendered
  std::atomic<uint64_t> from_decoded{0};     // variants rendered from cached decoded pixels
  std::atomic<uint64_t> errors{0};           // files that could not be rendered (EIO)
  std::atomic<uint64_t> cpu_ns{0};           // thread CPU time spent in transforms
  // The same split by kind, for the partition model's per-sample costs.
  std::atomic<uint64_t> decode_cpu_ns{0};            // decoded/ renders (decode + encode)
  std::atomic<uint64_t> augment_cpu_ns{0};           // augmented renders from JPEG bytes
  std::atomic<uint64_t> augment_from_decoded_cpu_ns{0};
  std::atomic<uint64_t> waits{0};            // renders that waited for a cpu slot
};

class SampleRenderer {
 public:
  SampleRenderer(Source& source, const Tree& tree, TierManager& cache, RenderConfig cfg);

  uint64_t decoded_size(uint32_t node) const;
  uint64_t augmented_size(uint32_t node) const;
  ChunkRef decoded(uint32_t node);
  ChunkRef augmented(uint32_t node, uint32_t variant);
  // Frees a variant that will not be served again (aug_reuse reached).
  void forget_augmented(uint32_t node, uint32_t variant);
  // Drops every cached entry of one form of a sample (its raw chunks, its decoded pixels, or its
  // augmented variants `variant` and the one before): the partition moved it elsewhere.
  void forget(uint32_t node, Form form, uint32_t variant);

  // The partition's placement decides which forms of which samples are kept, and where (null:
  // every render and every fetched chunk is kept in both tiers).
  void set_placer(const Placer* placer) { placer_ = placer; }

  const RenderConfig& config() const { return cfg_; }
  const RenderCounters& counters() const { return counters_; }

 private:
  CacheKey key(uint32_t node, Form form, uint32_t variant) const;
  std::vector<uint8_t> raw_bytes(uint32_t node);
  template <class F>
  ChunkRef transform(uint32_t node, std::atomic<uint64_t>& cpu_bucket, F&& body);
  void check_limits(uint32_t node) const;

  Admission admission(uint32_t node, Form form) const {
    return placer_ ? placer_->admission(node, form) : Admission{};
  }

  Source& source_;
  const Tree& tree_;
  TierManager& cache_;
  const Placer* placer_ = nullptr;
  RenderConfig cfg_;
  uint64_t decoded_hash_;
  uint64_t augmented_hash_;
  RenderCounters counters_;
  std::counting_semaphore<1024> cpu_slots_;
  std::mutex logged_mu_;
  std::unordered_set<uint32_t> logged_;  // files whose failure was already logged
};

}  // namespace prepfs
