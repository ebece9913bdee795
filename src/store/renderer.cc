#include "prepfs/store/renderer.h"

#include <spdlog/spdlog.h>
#include <time.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "prepfs/cache/fill_withdrawn.h"
#include "prepfs/common/error.h"
#include "prepfs/common/log_limiter.h"
#include "prepfs/transform/error.h"
#include "prepfs/transform/render.h"
#include "prepfs/transform/rng.h"

namespace prepfs {
namespace {

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

LogLimiter g_timeout_log;
LogLimiter g_memory_log;

std::span<uint8_t> writable(const std::shared_ptr<Chunk>& c) {
  return {reinterpret_cast<uint8_t*>(c->mutable_data()), c->size()};
}

// Encodes img straight into a new chunk of the size stat() promised (no intermediate copy).
ChunkRef encode_chunk(transform::OutputFormat format, const transform::Image& img, uint64_t promised) {
  auto c = Chunk::allocate(promised);
  if (transform::encoded_size(format, img.width, img.height) != promised)
    throw transform::DecodeError(transform::DecodeError::Kind::kCorrupt, "output size differs from its promise");
  transform::encode_into(format, img.view(), writable(c));
  return c;
}

}  // namespace

Renderer::Renderer(RenderConfig cfg, RenderCounters& counters)
    : cfg_(std::move(cfg)),
      counters_(counters),
      cpu_slots_(std::max<uint64_t>(1, cfg_.cpu)),
      memory_(cfg_.transform_mem),
      verified_(cfg_.files) {
  counters_.cpu_slots.store(cpu_slots_.total(), std::memory_order_relaxed);
  // Everything the bytes depend on beyond the sample and the variant number: the format, the
  // transform code's version (a decode that changes pixels must not meet the old ones on the SSD
  // or in the shared tier), and for variants the pipeline and the seed of their random streams.
  const uint8_t fmt = static_cast<uint8_t>(cfg_.shapes.format);
  decoded_hash_ = XXH3_64bits_withSeed(&fmt, 1, transform::kTransformVersion);
  const uint64_t seed = cfg_.seed;
  augmented_hash_ = transform::pipeline_key(cfg_.shapes.spec, cfg_.fast) ^ (decoded_hash_ * 0x9E3779B97F4A7C15ull) ^
                    XXH3_64bits_withSeed(&seed, sizeof seed, 0x5EED);
}

void Renderer::fail(const Sample& s, const std::string& why) {
  bump(counters_.errors);
  bool first;
  {
    std::lock_guard lock(logged_mu_);
    first = logged_.insert(s.node).second;
  }
  if (first) spdlog::warn("{}: cannot decode: {}", s.path, why);
  throw Error(EIO, s.path + ": " + why);
}

void Renderer::timed_out(const Sample& s, const char* what) {
  bump(counters_.timeouts);
  const double secs = std::chrono::duration<double>(cfg_.wait).count();
  if (g_timeout_log.allow())
    spdlog::warn("{}: waited {:.3g} s for {}; giving up (ETIMEDOUT): the transforms are overloaded", s.path, secs,
                 what);
  throw Error(ETIMEDOUT, s.path + ": waited " + fmt::format("{:.3g}", secs) + " s for " + what);
}

void Renderer::check_renderable(const Sample& s) {
  if (s.is_sample) {
    if (s.version.size <= cfg_.max_input) return;
    fail(s, "the file is " + std::to_string(s.version.size) +
                " bytes, more than max_input=" + std::to_string(cfg_.max_input));
  }
  if (cfg_.shapes.too_large(s.dims))
    fail(s, std::to_string(s.dims.width) + "x" + std::to_string(s.dims.height) + " is more than max_pixels");
  throw Error(ENOENT, s.path + " is not an image");
}

Renderer::Memory Renderer::take_memory(const Sample& s, RenderPath path, SlotUse slot) {
  const RenderMemory need = render_memory(cfg_.shapes, s.dims, s.version.size, path, cfg_.transform_mem);
  if (need.total() > cfg_.transform_mem)
    fail(s, "rendering it needs " + std::to_string(need.total()) +
                " bytes, more than transform_mem=" + std::to_string(cfg_.transform_mem));
  ResourceBudget::Take took = memory_.take(need.total(), std::chrono::milliseconds(0));
  // Work ahead holds its cpu slot already; a reader takes memory first and its slot after. Were
  // the work ahead to wait for memory while holding the slot, a reader holding the memory would
  // wait for that slot: both until the wait ends. Work ahead gives way instead.
  if (took == ResourceBudget::Take::timed_out && slot == SlotUse::held)
    throw FillWithdrawn(s.path + ": transform memory in use; the work ahead gives way");
  if (took == ResourceBudget::Take::timed_out) {
    bump(counters_.memory_waits);
    took = memory_.take(need.total(), cfg_.wait);
  }
  if (took != ResourceBudget::Take::taken) timed_out(s, "transform memory");
  return Memory{ResourceBudget::Hold(&memory_, need.total()), need.libjpeg()};
}

ResourceBudget::Hold Renderer::take_slot(const Sample& s) {
  if (cpu_slots_.take(1, std::chrono::milliseconds(0)) != ResourceBudget::Take::taken) {
    bump(counters_.waits);
    const uint64_t t0 = steady_ns();
    const ResourceBudget::Take took = cpu_slots_.take(1, cfg_.wait);
    bump(counters_.cpu_wait_ns, steady_ns() - t0);
    if (took != ResourceBudget::Take::taken) timed_out(s, "a cpu slot");
  }
  return ResourceBudget::Hold(&cpu_slots_, 1);
}

ResourceBudget::Hold Renderer::idle_slot(std::chrono::milliseconds wait) {
  if (!(wait.count() > 0 ? cpu_slots_.take_when_idle(1, wait) : cpu_slots_.take_if_idle(1))) return {};
  return ResourceBudget::Hold(&cpu_slots_, 1);
}

void Renderer::set_cpu_slots(unsigned n) {
  cpu_slots_.set_total(std::max(1u, n));
  counters_.cpu_slots.store(cpu_slots_.total(), std::memory_order_relaxed);
}

template <class F>
ChunkRef Renderer::transform(const Sample& s, std::atomic<uint64_t>& cpu_bucket, SlotUse slot_use, F&& body) {
  const ResourceBudget::Hold slot = slot_use == SlotUse::take ? take_slot(s) : ResourceBudget::Hold();
  const uint64_t t0 = thread_cpu_ns(), wall0 = steady_ns();
  const auto charge = [&] {
    bump(counters_.cpu_ns, thread_cpu_ns() - t0);
    bump(counters_.slot_busy_ns, steady_ns() - wall0);
  };
  try {
    ChunkRef out = body();
    const uint64_t spent = thread_cpu_ns() - t0;
    bump(counters_.cpu_ns, spent);
    bump(cpu_bucket, spent);
    bump(counters_.slot_busy_ns, steady_ns() - wall0);
    return out;
  } catch (const transform::TransformError& e) {
    charge();
    fail(s, e.what());
  } catch (const Error&) {
    charge();
    throw;  // the core's own, with its errno
  } catch (const std::bad_alloc&) {
    charge();
    bump(counters_.errors);
    if (g_memory_log.allow()) spdlog::warn("{}: out of memory while rendering it (ENOMEM)", s.path);
    throw Error(ENOMEM, s.path + ": out of memory while rendering");
  } catch (const std::exception& e) {
    // Any other failure inside a transform (a size that disagrees with the buffer made for it:
    // std::length_error) fails this sample like a decode error: EIO, counted and said once. It
    // reached the reader as EIO with no line in the log.
    charge();
    fail(s, e.what());
  }
}

ChunkRef Renderer::decoded(const Sample& s, const FetchJpeg& jpeg, SlotUse slot) {
  check_renderable(s);
  const Memory memory = take_memory(s, RenderPath::decode, slot);
  const JpegBytes bytes = jpeg();
  return transform(s, counters_.decode_cpu_ns, slot, [&] {
    auto c = Chunk::allocate(cfg_.shapes.decoded_size(s.dims));
    transform::DecodeLimits limits;
    limits.max_pixels = cfg_.shapes.max_pixels;
    limits.max_memory = memory.libjpeg;
    size_t n = transform::render_decoded(bytes.bytes, cfg_.shapes.format, writable(c), limits);
    if (n != c->size())
      throw transform::DecodeError(transform::DecodeError::Kind::kCorrupt,
                                   "decoded size differs from the header's promise");
    verified_.insert(s.node, s.version);  // a full decode
    bump(counters_.decoded);
    return ChunkRef(c);
  });
}

bool Renderer::renders_from_pixels(const Sample& s, uint32_t variant) const {
  return !transform::decodes_at_dct_scale(cfg_.shapes.spec, int(s.dims.width), int(s.dims.height),
                                          transform::Rng::for_variant(cfg_.seed, s.path, variant), cfg_.fast);
}

ChunkRef Renderer::augmented(const Sample& s, uint32_t variant, const ChunkRef& decoded, const FetchJpeg& jpeg,
                             SlotUse slot) {
  check_renderable(s);
  transform::Rng rng = transform::Rng::for_variant(cfg_.seed, s.path, variant);
  const uint64_t out_size = cfg_.shapes.augmented_size(s.dims);
  const uint64_t header = cfg_.shapes.decoded_header_size(s.dims);
  // Cheapest start first: decoded pixels at hand skip the JPEG decode entirely; unless the JPEG
  // path decodes this variant at a DCT scale, whose bytes the full-size pixels cannot give.
  if (decoded && decoded->size() == header + uint64_t(s.dims.width) * s.dims.height * 3 &&
      renders_from_pixels(s, variant)) {
    const Memory memory = take_memory(s, RenderPath::augment_from_pixels, slot);
    return transform(s, counters_.augment_from_decoded_cpu_ns, slot, [&] {
      transform::check_sizes(cfg_.shapes.spec, int(s.dims.width), int(s.dims.height), cfg_.shapes.max_pixels);
      transform::ImageView view{reinterpret_cast<const uint8_t*>(decoded->data()) + header, int(s.dims.width),
                                int(s.dims.height), std::ptrdiff_t(s.dims.width) * 3};
      transform::Image img = transform::apply_ops(view, cfg_.shapes.spec.ops(), rng);  // copies only the crop
      ChunkRef out = encode_chunk(cfg_.shapes.format, img, out_size);
      bump(counters_.augmented);
      bump(counters_.from_decoded);
      return out;
    });
  }
  const Memory memory = take_memory(s, RenderPath::augment_from_jpeg, slot);
  const JpegBytes bytes = jpeg();
  return transform(s, counters_.augment_cpu_ns, slot, [&] {
    transform::AugmentOptions opts;
    opts.limits.max_pixels = cfg_.shapes.max_pixels;
    opts.limits.max_memory = memory.libjpeg;
    opts.fast = cfg_.fast;
    // These bytes decoded to their end before: the crop need not read below itself.
    const bool verified = verified_.contains(s.node, s.version);
    opts.fast.stop_below_crop = cfg_.fast.crop_decode && verified;
    transform::Image img = transform::augment_jpeg(bytes.bytes, cfg_.shapes.spec, rng, opts);
    if (!verified) verified_.insert(s.node, s.version);  // read to the end without an error
    ChunkRef out = encode_chunk(cfg_.shapes.format, img, out_size);
    if (opts.fast.stop_below_crop) bump(counters_.stopped_below_crop);
    bump(counters_.augmented);
    return out;
  });
}

}  // namespace prepfs
