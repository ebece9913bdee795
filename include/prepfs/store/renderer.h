// Renders the derived forms of a sample, from the cheapest form at hand: an augmented variant
// from decoded pixels when the store has them (no JPEG decode at all), else from the JPEG bytes;
// decoded pixels from the JPEG bytes. Transforms run under a `cpu` budget: at most that many at
// once, whatever the FUSE thread count. A file that cannot be decoded is EIO, logged once.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <semaphore>
#include <span>
#include <unordered_set>

#include "prepfs/cache/chunk.h"
#include "prepfs/common/stats.h"
#include "prepfs/index/sample_shapes.h"
#include "prepfs/store/sample.h"
#include "prepfs/transform/augment.h"

namespace prepfs {

struct RenderConfig {
  SampleShapes shapes;        // format, pipeline spec, max_pixels
  transform::FastPaths fast;  // crop decode, DCT scaling (augmented/ only)
  uint64_t seed = 0;          // variant k of a file = f(seed, path, k)
  unsigned cpu = 1;           // concurrent transforms
};

// A JPEG's bytes, borrowed from a cached chunk when the file is one chunk (no copy), else
// assembled from its chunks.
struct JpegBytes {
  ChunkRef hold;
  std::vector<uint8_t> owned;
  std::span<const uint8_t> bytes;
};

class Renderer {
 public:
  Renderer(RenderConfig cfg, RenderCounters& counters);

  // The decoded file (header + pixels) of a sample.
  ChunkRef decoded(const Sample& s, const JpegBytes& jpeg);
  // Variant `variant` of the augmented file. `decoded` (may be null) is the decoded file if the
  // store has it at hand; `jpeg` fetches the JPEG bytes otherwise.
  ChunkRef augmented(const Sample& s, uint32_t variant, const ChunkRef& decoded,
                     const std::function<JpegBytes()>& jpeg);

  // Throws EIO (logged once per file) unless the sample is one the views can render.
  void check_renderable(const Sample& s);
  // A CPU slot is free right now (work ahead of the readers runs only then).
  bool has_idle_slot() const { return busy_.load(std::memory_order_relaxed) < int(cfg_.cpu); }

  const RenderConfig& config() const { return cfg_; }
  const SampleShapes& shapes() const { return cfg_.shapes; }
  // What determines augmented bytes besides (seed, path, variant): the spec, the fast paths and
  // the output format. Part of every augmented cache key.
  uint64_t augmented_pipeline_hash() const { return augmented_hash_; }
  uint64_t decoded_pipeline_hash() const { return decoded_hash_; }

 private:
  template <class F>
  ChunkRef transform(const Sample& s, std::atomic<uint64_t>& cpu_bucket, F&& body);
  [[noreturn]] void fail(const Sample& s, const std::string& why);

  RenderConfig cfg_;
  RenderCounters& counters_;
  uint64_t decoded_hash_;
  uint64_t augmented_hash_;
  std::counting_semaphore<1024> cpu_slots_;
  std::atomic<int> busy_{0};  // slots taken
  std::mutex logged_mu_;
  std::unordered_set<uint32_t> logged_;  // files whose failure was already logged
};

}  // namespace prepfs
