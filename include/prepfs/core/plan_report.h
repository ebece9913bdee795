// The partition model's inputs (src/model, docs/MODEL.md) as this mount measured them: the
// planner (core/planner.h) plans from them and .prepfs/plan explains them.
#pragma once

#include <string>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/core/profiler.h"
#include "prepfs/core/sample_renderer.h"
#include "prepfs/core/tree.h"
#include "prepfs/model/inputs.h"
#include "prepfs/source/source.h"

namespace prepfs {

struct PlanSources {
  const Tree& tree;
  TierManager& cache;
  Source& source;
  const SampleRenderer& renderer;
  const Profiler& profiler;  // the measured inputs
  unsigned aug_reuse = 1;
  unsigned fuse_threads = 64;
};

// The model's inputs from the profiler's EWMAs. Unmeasured costs get stated priors (listed in
// notes), never a silent 0 that would make a resource look free.
model::Inputs measured_inputs(const PlanSources& s, std::string* notes);

}  // namespace prepfs
