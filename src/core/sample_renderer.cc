#include "prepfs/core/sample_renderer.h"

#include <spdlog/spdlog.h>
#include <time.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "prepfs/common/error.h"
#include "prepfs/core/raw_chunk.h"
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

ChunkRef to_chunk(const std::vector<uint8_t>& bytes) {
  auto c = Chunk::allocate(bytes.size());
  std::memcpy(c->mutable_data(), bytes.data(), bytes.size());
  return c;
}

}  // namespace

SampleRenderer::SampleRenderer(Source& source, const Tree& tree, TierManager& cache, RenderConfig cfg)
    : source_(source), tree_(tree), cache_(cache), cfg_(std::move(cfg)),
      cpu_slots_(std::max<std::ptrdiff_t>(1, std::min<std::ptrdiff_t>(cfg_.cpu, 1024))) {
  uint8_t fmt = static_cast<uint8_t>(cfg_.format);
  decoded_hash_ = XXH3_64bits(&fmt, 1);
  augmented_hash_ = transform::pipeline_key(cfg_.spec, cfg_.augment.fast) ^ (decoded_hash_ * 0x9E3779B97F4A7C15ull);
}

uint64_t SampleRenderer::decoded_size(uint32_t node) const {
  ImageDims d = tree_.dims(node);
  return transform::encoded_size(cfg_.format, static_cast<int>(d.width), static_cast<int>(d.height));
}

uint64_t SampleRenderer::augmented_size(uint32_t node) const {
  ImageDims d = tree_.dims(node);
  transform::Size out = cfg_.spec.output_size(static_cast<int>(d.width), static_cast<int>(d.height));
  return transform::encoded_size(cfg_.format, out.width, out.height);
}

CacheKey SampleRenderer::key(uint32_t node, Form form, uint32_t variant) const {
  FileVersion v = tree_.version(node);
  std::string path = tree_.path(node);
  return make_key(KeyFields{path, v.size, v.mtime_ns, form, form == Form::decoded ? decoded_hash_ : augmented_hash_,
                            variant, 0});
}

void SampleRenderer::check_limits(uint32_t node) const {
  ImageDims d = tree_.dims(node);
  if (uint64_t(d.width) * d.height > cfg_.augment.limits.max_pixels)
    throw transform::DecodeError(transform::DecodeError::Kind::kTooLarge,
                                 std::to_string(d.width) + "x" + std::to_string(d.height) +
                                     " is more than max_pixels");
}

// The raw bytes of a whole file, chunk by chunk: from the tiers where cached, else from the source,
// kept only where the placement puts this sample's raw form (what to cache is the partition's
// decision, not a side effect of rendering).
std::vector<uint8_t> SampleRenderer::raw_bytes(uint32_t node) {
  FileVersion v = tree_.version(node);
  std::string path = tree_.path(node);
  const Admission admit = admission(node, Form::raw);
  std::vector<uint8_t> out(v.size);
  for (uint64_t off = 0, idx = 0; off < v.size; off += cfg_.chunk_size, idx++) {
    ChunkRef c = raw_chunk(source_, cache_, path, v, idx, cfg_.chunk_size, admit);
    std::memcpy(out.data() + off, c->data(), c->size());
  }
  return out;
}

template <class F>
ChunkRef SampleRenderer::transform(uint32_t node, std::atomic<uint64_t>& cpu_bucket, F&& body) {
  if (!cpu_slots_.try_acquire()) {
    bump(counters_.waits);
    cpu_slots_.acquire();
  }
  struct Release {
    std::counting_semaphore<1024>& s;
    ~Release() { s.release(); }
  } release{cpu_slots_};
  uint64_t t0 = thread_cpu_ns();
  try {
    check_limits(node);
    ChunkRef out = body();
    uint64_t spent = thread_cpu_ns() - t0;
    bump(counters_.cpu_ns, spent);
    bump(cpu_bucket, spent);
    return out;
  } catch (const transform::TransformError& e) {
    bump(counters_.cpu_ns, thread_cpu_ns() - t0);
    bump(counters_.errors);
    bool first;
    {
      std::lock_guard lock(logged_mu_);
      first = logged_.insert(node).second;
    }
    if (first) spdlog::warn("{}: cannot decode: {}", tree_.path(node), e.what());
    throw Error(EIO, tree_.path(node) + ": " + e.what());
  }
}

ChunkRef SampleRenderer::decoded(uint32_t node) {
  return cache_.get_or_fill(key(node, Form::decoded, 0), Form::decoded, [&] {
    std::vector<uint8_t> jpeg = raw_bytes(node);
    return transform(node, counters_.decode_cpu_ns, [&] {
      auto c = Chunk::allocate(decoded_size(node));
      size_t n = transform::render_decoded(jpeg, cfg_.format,
                                           std::span<uint8_t>(reinterpret_cast<uint8_t*>(c->mutable_data()), c->size()),
                                           cfg_.augment.limits);
      if (n != c->size()) throw Error(EIO, "decoded size differs from the header's promise");
      bump(counters_.decoded);
      return ChunkRef(c);
    });
  }, admission(node, Form::decoded));
}

ChunkRef SampleRenderer::augmented(uint32_t node, uint32_t variant) {
  return cache_.get_or_fill(key(node, Form::augmented, variant), Form::augmented, [&] {
    transform::Rng rng = transform::Rng::for_variant(cfg_.seed, tree_.path(node), variant);
    // Cheapest start first: decoded pixels already in a tier skip the JPEG decode entirely. A
    // sample the placement keeps decoded gets its pixels decoded (and admitted) first, so an
    // epoch read through augmented/ fills the decoded slots too.
    ChunkRef dec = cache_.lookup(key(node, Form::decoded, 0));
    if (!dec && admission(node, Form::decoded).any()) dec = decoded(node);
    if (dec) {
      ImageDims d = tree_.dims(node);
      size_t header = transform::encoded_header(cfg_.format, int(d.width), int(d.height)).size();
      if (dec->size() == header + uint64_t(d.width) * d.height * 3) {
        return transform(node, counters_.augment_from_decoded_cpu_ns, [&] {
          transform::ImageView view{reinterpret_cast<const uint8_t*>(dec->data()) + header, int(d.width),
                                    int(d.height), std::ptrdiff_t(d.width) * 3};
          transform::Image img = transform::apply_ops(transform::copy_image(view), cfg_.spec.ops(), rng);
          bump(counters_.augmented);
          bump(counters_.from_decoded);
          return to_chunk(transform::encode(cfg_.format, img.view()));
        });
      }
    }
    std::vector<uint8_t> jpeg = raw_bytes(node);
    return transform(node, counters_.augment_cpu_ns, [&] {
      bump(counters_.augmented);
      return to_chunk(transform::render_augmented(jpeg, cfg_.spec, rng, cfg_.format, cfg_.augment));
    });
  }, admission(node, Form::augmented));
}

void SampleRenderer::forget_augmented(uint32_t node, uint32_t variant) {
  cache_.erase(key(node, Form::augmented, variant));
}

void SampleRenderer::forget(uint32_t node, Form form, uint32_t variant) {
  switch (form) {
    case Form::raw: {
      FileVersion v = tree_.version(node);
      std::string path = tree_.path(node);
      for (uint64_t off = 0, idx = 0; off < v.size; off += cfg_.chunk_size, idx++)
        cache_.erase(make_key(KeyFields{path, v.size, v.mtime_ns, Form::raw, 0, 0, idx}));
      break;
    }
    case Form::decoded: cache_.erase(key(node, Form::decoded, 0)); break;
    case Form::augmented:
      cache_.erase(key(node, Form::augmented, variant));
      if (variant > 0) cache_.erase(key(node, Form::augmented, variant - 1));
      break;
  }
}

}  // namespace prepfs
