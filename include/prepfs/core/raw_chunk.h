// One chunk of a file's raw bytes through the cache: from a tier, or fetched from the source (which
// checks the indexed version) and admitted where `admit` says. raw/ reads (DataFs) and the JPEG
// bytes behind decoded/ and augmented/ renders (SampleRenderer) both come through here.
#pragma once

#include <string>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/source/source.h"

namespace prepfs {

ChunkRef raw_chunk(Source& source, TierManager& cache, const std::string& path, const FileVersion& v, uint64_t idx,
                   uint64_t chunk_size, Admission admit);

}  // namespace prepfs
