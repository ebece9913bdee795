// The one owner of the sample read path. A request resolves its sample once (node, path,
// version, placement slot); the store then builds the cache keys, cuts raw bytes into chunks of
// one size, decides admission from the slot, and fills misses: raw chunks from the source,
// decoded pixels and augmented variants through the Renderer from the cheapest form at hand.
// Nothing above it builds a key, knows the chunk size or talks to a tier.
#pragma once

#include <cstdint>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/common/forms.h"
#include "prepfs/index/tree.h"
#include "prepfs/partition/placer.h"
#include "prepfs/source/source.h"
#include "prepfs/store/renderer.h"
#include "prepfs/store/sample.h"

namespace prepfs {

struct StoreConfig {
  uint64_t chunk_size = 1ull << 20;  // raw bytes are cached in chunks of this size (part of the key)
};

class SampleStore {
 public:
  SampleStore(Source& source, const Tree& tree, TierManager& cache, const Placer& placer, Renderer& renderer,
              StoreConfig cfg = {});

  Sample resolve(uint32_t node) const;

  // Chunk `index` of the raw bytes (the last chunk may be shorter).
  ChunkRef raw(const Sample& s, uint64_t index);
  // The decoded file: header + pixels (EIO for a file that is not a sample).
  ChunkRef decoded(const Sample& s);
  // Variant `variant` of the augmented file. On its last serve the variant is never admitted to
  // a tier (and a cached copy is dropped): nobody will ask for it again.
  ChunkRef augmented(const Sample& s, uint32_t variant, bool last_serve);
  // Drops every cached entry of one form of a sample: its raw chunks, its decoded pixels, or
  // augmented variants `variant` and the one before (the partition moved it elsewhere).
  void forget(const Sample& s, Form form, uint32_t variant);

  // Where a fill of `form` of s may be kept: its slot's tier when the slot holds that form,
  // nowhere when the slot holds another form, everywhere for files that are not samples.
  static Admission admission(const Sample& s, Form form);

  uint64_t chunk_size() const { return cfg_.chunk_size; }
  uint64_t chunks(const Sample& s) const { return (s.version.size + cfg_.chunk_size - 1) / cfg_.chunk_size; }
  const SampleShapes& shapes() const { return renderer_.shapes(); }
  const Tree& tree() const { return tree_; }

 private:
  CacheKey key(const Sample& s, Form form, uint32_t variant, uint64_t chunk) const;
  ChunkRef fetch_chunk(const Sample& s, uint64_t index);  // from the source, checked
  JpegBytes jpeg(const Sample& s);

  Source& source_;
  const Tree& tree_;
  TierManager& cache_;
  const Placer& placer_;
  Renderer& renderer_;
  StoreConfig cfg_;
};

}  // namespace prepfs
