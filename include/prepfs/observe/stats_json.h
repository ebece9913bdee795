// The JSON behind .prepfs/stats.
#pragma once

#include <string>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/common/stats.h"
#include "prepfs/index/tree.h"
#include "prepfs/partition/job_knowledge.h"
#include "prepfs/partition/profiler.h"
#include "prepfs/source/source.h"

namespace prepfs {

// What the stats and metrics report on; every reference must outlive the call.
struct StatsSources {
  TierManager& cache;
  Source& source;
  const Tree& tree;
  const ViewCounters& views;
  const RenderCounters& renders;
  const Profiler* profiler = nullptr;  // null: no "profile" object / gauges
  const PrefetchCounters* prefetch = nullptr;
  const JobKnowledge* jobs = nullptr;  // published orders
  const RenderAheadCounters* render_ahead = nullptr;
};

std::string render_stats_json(const StatsSources& s);

// The "profile" object: the partition model's measured inputs (core/profiler.h defines each).
std::string profile_json(const Profile& p);

}  // namespace prepfs
