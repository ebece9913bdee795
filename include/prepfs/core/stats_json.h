// The JSON behind .prepfs/stats.
#pragma once

#include <string>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/core/data_fs.h"
#include "prepfs/source/source.h"

namespace prepfs {

std::string render_stats_json(TierManager& cache, Source& source, const DataFs& fs, const SampleRenderer* renderer);

}  // namespace prepfs
