// Renders the derived forms of a sample, from the cheapest form at hand: an augmented variant
// from decoded pixels when the store has them (no JPEG decode at all), else from the JPEG bytes;
// decoded pixels from the JPEG bytes. Transforms run under a `cpu` budget: at most that many at
// once, whatever the FUSE thread count (cpu=auto resizes it; the time renders wait for a slot is
// counted, it is the stall more slots would remove). Their memory is bounded too: before the JPEG bytes are
// fetched a render takes what it may use at its peak (store/render_memory.h: input, libjpeg,
// pixels, output) from one `transform_mem` budget, and gives it back when done; an input over
// `max_input` or a render that cannot fit the budget is refused before any fetch. A file that
// cannot be rendered is EIO, logged once. Waits for a cpu slot or for memory are bounded
// (`wait`): past it the request fails with ETIMEDOUT and a log line.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <span>
#include <unordered_set>

#include "prepfs/cache/chunk.h"
#include "prepfs/common/resource_budget.h"
#include "prepfs/common/stats.h"
#include "prepfs/index/sample_shapes.h"
#include "prepfs/store/render_memory.h"
#include "prepfs/store/sample.h"
#include "prepfs/store/verified_files.h"
#include "prepfs/transform/augment.h"

namespace prepfs {

struct RenderConfig {
  SampleShapes shapes;                                       // format, pipeline spec, max_pixels
  transform::FastPaths fast;                                 // crop decode, DCT scaling (augmented/ only)
  uint64_t seed = 0;                                         // variant k of a file = f(seed, path, k)
  unsigned cpu = 1;                                          // concurrent transforms
  uint64_t transform_mem = 512ull << 20;                     // bytes all renders in progress may use together
  uint64_t max_input = 128ull << 20;                         // larger image files are refused (EIO)
  std::chrono::milliseconds wait{std::chrono::seconds(60)};  // for a cpu slot, for memory
  uint64_t files = 0;  // files in the tree: sizes the set of files verified to decode to their end
};

// A JPEG's bytes, borrowed from a cached chunk when the file is one chunk (no copy), else
// assembled from its chunks.
struct JpegBytes {
  ChunkRef hold;
  std::vector<uint8_t> owned;
  std::span<const uint8_t> bytes;
};

// Whether a render takes a cpu slot itself (waiting for one if none is free), or runs in the one
// its caller already holds (Renderer::idle_slot(): work ahead of the readers).
enum class SlotUse { take, held };

class Renderer {
 public:
  Renderer(RenderConfig cfg, RenderCounters& counters);

  using FetchJpeg = std::function<JpegBytes()>;
  // The decoded file (header + pixels) of a sample; `jpeg` fetches its bytes (once the render's
  // memory is taken).
  ChunkRef decoded(const Sample& s, const FetchJpeg& jpeg, SlotUse slot = SlotUse::take);
  // Variant `variant` of the augmented file. `decoded` (may be null) is the decoded file if the
  // store has it at hand; `jpeg` fetches the JPEG bytes otherwise.
  ChunkRef augmented(const Sample& s, uint32_t variant, const ChunkRef& decoded, const FetchJpeg& jpeg,
                     SlotUse slot = SlotUse::take);

  // Throws EIO (logged once per file) unless the sample is one the views can render: an image
  // within max_pixels whose file is within max_input.
  void check_renderable(const Sample& s);
  // A CPU slot is free right now (work ahead of the readers runs only then).
  bool has_idle_slot() const { return cpu_slots_.in_use() < cpu_slots_.total(); }
  // A cpu slot taken for work ahead of the readers (renders with SlotUse::held run in it), only
  // if one is free and no render waits for one: now, or once that happens within `wait` (woken,
  // not polled); empty otherwise.
  ResourceBudget::Hold idle_slot(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // cpu=auto: the number of transforms that may run at once from now on (at least 1).
  void set_cpu_slots(unsigned n);
  unsigned cpu_slots() const { return unsigned(cpu_slots_.total()); }

  uint64_t transform_mem_in_use() const { return memory_.in_use(); }

  const RenderConfig& config() const { return cfg_; }
  const SampleShapes& shapes() const { return cfg_.shapes; }
  // What determines augmented bytes besides the sample and the variant number (the key's other
  // fields): the seed, the spec, the fast paths, the output format and the transform version.
  // Part of every augmented cache key; decoded_pipeline_hash is the format and the version.
  uint64_t augmented_pipeline_hash() const { return augmented_hash_; }
  // Whether cached pixels can give this variant's bytes: not when the JPEG path decodes it at a
  // DCT scale (augmented() then takes the JPEG even with pixels at hand).
  bool renders_from_pixels(const Sample& s, uint32_t variant) const;
  uint64_t decoded_pipeline_hash() const { return decoded_hash_; }

 private:
  // What a render may use at its peak, taken from transform_mem (refused when it cannot fit).
  // A reader waits for it; work ahead (slot held) does not: FillWithdrawn (EBUSY) when it is not
  // free at once.
  struct Memory {
    ResourceBudget::Hold hold;
    uint64_t libjpeg = 0;  // libjpeg's cap
  };
  Memory take_memory(const Sample& s, RenderPath path, SlotUse slot);
  template <class F>
  ChunkRef transform(const Sample& s, std::atomic<uint64_t>& cpu_bucket, SlotUse slot, F&& body);
  ResourceBudget::Hold take_slot(const Sample& s);
  [[noreturn]] void fail(const Sample& s, const std::string& why);
  [[noreturn]] void timed_out(const Sample& s, const char* what);

  RenderConfig cfg_;
  RenderCounters& counters_;
  uint64_t decoded_hash_;
  uint64_t augmented_hash_;
  ResourceBudget cpu_slots_;
  ResourceBudget memory_;
  VerifiedFiles verified_;  // decoded to their end once: later crops stop reading below themselves
  std::mutex logged_mu_;
  std::unordered_set<uint32_t> logged_;  // files whose failure was already logged
};

}  // namespace prepfs
