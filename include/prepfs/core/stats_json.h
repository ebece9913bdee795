// The JSON behind .prepfs/stats.
#pragma once

#include <string>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/core/data_fs.h"
#include "prepfs/core/profiler.h"
#include "prepfs/source/source.h"

namespace prepfs {

// profiler may be null (no "profile" object then).
std::string render_stats_json(TierManager& cache, Source& source, const DataFs& fs, const SampleRenderer* renderer,
                              const Profiler* profiler = nullptr);

// The "profile" object: the partition model's measured inputs (core/profiler.h defines each).
std::string profile_json(const Profile& p);

}  // namespace prepfs
