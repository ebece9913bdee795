#include "prepfs/core/raw_chunk.h"

#include <algorithm>
#include <cerrno>

#include "prepfs/common/error.h"

namespace prepfs {

ChunkRef raw_chunk(Source& source, TierManager& cache, const std::string& path, const FileVersion& v, uint64_t idx,
                   uint64_t chunk_size, Admission admit) {
  const uint64_t start = idx * chunk_size;
  const size_t len = static_cast<size_t>(std::min<uint64_t>(chunk_size, v.size - start));
  CacheKey key = make_key(KeyFields{path, v.size, v.mtime_ns, Form::raw, 0, 0, idx});
  ChunkRef c = cache.get_or_fill(
      key, Form::raw,
      [&]() -> ChunkRef {
        auto fresh = Chunk::allocate(len);
        if (source.read(path, v, start, fresh->mutable_data(), len) != len)
          throw Error(EIO, "source file " + path + " is shorter than indexed");
        return fresh;
      },
      admit);
  if (c->size() != len) throw Error(EIO, "cached chunk of " + path + " has the wrong size");
  return c;
}

}  // namespace prepfs
