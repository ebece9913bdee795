#include "prepfs/store/renderer.h"

#include <spdlog/spdlog.h>
#include <time.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "prepfs/common/error.h"
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
      cpu_slots_(std::max<std::ptrdiff_t>(1, std::min<std::ptrdiff_t>(cfg_.cpu, 1024))) {
  uint8_t fmt = static_cast<uint8_t>(cfg_.shapes.format);
  decoded_hash_ = XXH3_64bits(&fmt, 1);
  augmented_hash_ = transform::pipeline_key(cfg_.shapes.spec, cfg_.fast) ^ (decoded_hash_ * 0x9E3779B97F4A7C15ull);
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

void Renderer::check_renderable(const Sample& s) {
  if (s.is_sample) return;
  if (cfg_.shapes.too_large(s.dims))
    fail(s, std::to_string(s.dims.width) + "x" + std::to_string(s.dims.height) + " is more than max_pixels");
  throw Error(ENOENT, s.path + " is not an image");
}

template <class F>
ChunkRef Renderer::transform(const Sample& s, std::atomic<uint64_t>& cpu_bucket, F&& body) {
  if (!cpu_slots_.try_acquire()) {
    bump(counters_.waits);
    cpu_slots_.acquire();
  }
  busy_.fetch_add(1, std::memory_order_relaxed);
  struct Release {
    std::counting_semaphore<1024>& sem;
    std::atomic<int>& busy;
    ~Release() {
      busy.fetch_sub(1, std::memory_order_relaxed);
      sem.release();
    }
  } release{cpu_slots_, busy_};
  const uint64_t t0 = thread_cpu_ns();
  try {
    ChunkRef out = body();
    const uint64_t spent = thread_cpu_ns() - t0;
    bump(counters_.cpu_ns, spent);
    bump(cpu_bucket, spent);
    return out;
  } catch (const transform::TransformError& e) {
    bump(counters_.cpu_ns, thread_cpu_ns() - t0);
    fail(s, e.what());
  }
}

ChunkRef Renderer::decoded(const Sample& s, const JpegBytes& jpeg) {
  check_renderable(s);
  return transform(s, counters_.decode_cpu_ns, [&] {
    auto c = Chunk::allocate(cfg_.shapes.decoded_size(s.dims));
    transform::DecodeLimits limits;
    limits.max_pixels = cfg_.shapes.max_pixels;
    size_t n = transform::render_decoded(jpeg.bytes, cfg_.shapes.format, writable(c), limits);
    if (n != c->size())
      throw transform::DecodeError(transform::DecodeError::Kind::kCorrupt,
                                   "decoded size differs from the header's promise");
    bump(counters_.decoded);
    return ChunkRef(c);
  });
}

ChunkRef Renderer::augmented(const Sample& s, uint32_t variant, const ChunkRef& decoded,
                             const std::function<JpegBytes()>& jpeg) {
  check_renderable(s);
  transform::Rng rng = transform::Rng::for_variant(cfg_.seed, s.path, variant);
  const uint64_t out_size = cfg_.shapes.augmented_size(s.dims);
  const uint64_t header = cfg_.shapes.decoded_header_size(s.dims);
  // Cheapest start first: decoded pixels at hand skip the JPEG decode entirely.
  if (decoded && decoded->size() == header + uint64_t(s.dims.width) * s.dims.height * 3) {
    return transform(s, counters_.augment_from_decoded_cpu_ns, [&] {
      transform::ImageView view{reinterpret_cast<const uint8_t*>(decoded->data()) + header, int(s.dims.width),
                                int(s.dims.height), std::ptrdiff_t(s.dims.width) * 3};
      transform::Image img = transform::apply_ops(view, cfg_.shapes.spec.ops(), rng);  // copies only the crop
      ChunkRef out = encode_chunk(cfg_.shapes.format, img, out_size);
      bump(counters_.augmented);
      bump(counters_.from_decoded);
      return out;
    });
  }
  const JpegBytes bytes = jpeg();
  return transform(s, counters_.augment_cpu_ns, [&] {
    transform::AugmentOptions opts;
    opts.limits.max_pixels = cfg_.shapes.max_pixels;
    opts.fast = cfg_.fast;
    transform::Image img = transform::augment_jpeg(bytes.bytes, cfg_.shapes.spec, rng, opts);
    ChunkRef out = encode_chunk(cfg_.shapes.format, img, out_size);
    bump(counters_.augmented);
    return out;
  });
}

}  // namespace prepfs
