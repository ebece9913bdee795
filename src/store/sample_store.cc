#include "prepfs/store/sample_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "prepfs/common/error.h"

namespace prepfs {

SampleStore::SampleStore(Source& source, const Tree& tree, TierManager& cache, const Placer& placer, Renderer& renderer,
                         StoreConfig cfg)
    : source_(source), tree_(tree), cache_(cache), placer_(placer), renderer_(renderer), cfg_(cfg) {}

Sample SampleStore::resolve(uint32_t node) const {
  Sample s;
  s.node = node;
  s.path = tree_.path(node);
  const Tree::FileState state = tree_.file_state(node);  // one version and its dimensions
  s.version = state.version;
  s.dims = state.dims;
  s.is_sample = S_ISREG(tree_.mode(node)) && shapes().is_sample(s.dims);
  if (s.is_sample) {
    const Placer::Placement p = placer_.place(Placer::sample_hash(s.path));
    s.placed = p.active;
    s.slot = p.slot;
  } else {
    s.placed = placer_.active();
  }
  return s;
}

Admission SampleStore::admission(const Sample& s, Form form) {
  if (!s.placed || !s.is_sample) return Admission{};
  if (!s.slot || s.slot->form != form) return Admission::none();
  return Admission{s.slot->tier == Tier::ram, s.slot->tier == Tier::ssd};
}

CacheKey SampleStore::key(const Sample& s, Form form, uint32_t variant, uint64_t chunk) const {
  KeyFields k;
  k.path = s.path;
  k.version = s.version;
  k.form = form;
  k.variant = variant;
  k.chunk = chunk;
  switch (form) {
    case Form::raw: k.chunk_size = cfg_.chunk_size; break;
    case Form::decoded: k.pipeline_hash = renderer_.decoded_pipeline_hash(); break;
    case Form::augmented: k.pipeline_hash = renderer_.augmented_pipeline_hash(); break;
  }
  return make_key(k);
}

ChunkRef SampleStore::fetch_chunk(const Sample& s, uint64_t index) {
  const uint64_t start = index * cfg_.chunk_size;
  const size_t len = static_cast<size_t>(std::min<uint64_t>(cfg_.chunk_size, s.version.size - start));
  auto fresh = Chunk::allocate(len);
  if (source_.read(s.path, s.version, start, fresh->mutable_data(), len) != len)
    throw Error(EIO, "source file " + s.path + " is shorter than indexed");
  return fresh;
}

ChunkRef SampleStore::raw(const Sample& s, uint64_t index) {
  if (index * cfg_.chunk_size >= s.version.size && !(index == 0 && s.version.size == 0))
    throw Error(EINVAL, "chunk " + std::to_string(index) + " is past the end of " + s.path);
  const size_t len = static_cast<size_t>(std::min<uint64_t>(cfg_.chunk_size, s.version.size - index * cfg_.chunk_size));
  ChunkRef c = cache_.get_or_fill(
      key(s, Form::raw, 0, index), Form::raw, [&] { return fetch_chunk(s, index); }, admission(s, Form::raw));
  if (c->size() != len) throw Error(EIO, "cached chunk of " + s.path + " has the wrong size");
  return c;
}

// The JPEG of a render: raw chunks from the tiers where cached, else from the source, kept only
// where the placement puts this sample's raw form (what to cache is the partition's decision,
// not a side effect of rendering).
JpegBytes SampleStore::jpeg(const Sample& s) {
  JpegBytes out;
  const uint64_t n = chunks(s);
  if (n == 1) {
    out.hold = raw(s, 0);
    out.bytes = {reinterpret_cast<const uint8_t*>(out.hold->data()), out.hold->size()};
    return out;
  }
  out.owned.resize(s.version.size);
  for (uint64_t i = 0; i < n; i++) {
    ChunkRef c = raw(s, i);
    std::memcpy(out.owned.data() + i * cfg_.chunk_size, c->data(), c->size());
  }
  out.bytes = out.owned;
  return out;
}

ChunkRef SampleStore::decoded(const Sample& s) {
  renderer_.check_renderable(s);
  return cache_.get_or_fill(
      key(s, Form::decoded, 0, 0), Form::decoded, [&] { return renderer_.decoded(s, [&] { return jpeg(s); }); },
      admission(s, Form::decoded));
}

ChunkRef SampleStore::augmented(const Sample& s, uint32_t variant, bool last_serve) {
  renderer_.check_renderable(s);
  const Admission admit = last_serve ? Admission::last() : admission(s, Form::augmented);
  return cache_.get_or_fill(
      key(s, Form::augmented, variant, 0), Form::augmented,
      [&] {
        // Decoded pixels at hand make the render cheapest. A sample the placement keeps decoded gets
        // its pixels decoded (and admitted) first, so an epoch read through augmented/ fills the
        // decoded slots too.
        ChunkRef dec = cache_.lookup(key(s, Form::decoded, 0, 0));
        if (!dec && admission(s, Form::decoded).any()) dec = decoded(s);
        return renderer_.augmented(s, variant, dec, [&] { return jpeg(s); });
      },
      admit);
}

void SampleStore::forget(const Sample& s, Form form, uint32_t variant) {
  switch (form) {
    case Form::raw:
      for (uint64_t i = 0; i < std::max<uint64_t>(1, chunks(s)); i++) cache_.erase(key(s, Form::raw, 0, i));
      break;
    case Form::decoded: cache_.erase(key(s, Form::decoded, 0, 0)); break;
    case Form::augmented:
      cache_.erase(key(s, Form::augmented, variant, 0));
      if (variant > 0) cache_.erase(key(s, Form::augmented, variant - 1, 0));
      break;
  }
}

}  // namespace prepfs
