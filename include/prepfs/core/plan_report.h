// .prepfs/plan: the partition model (src/model, docs/MODEL.md) fed with what this mount has
// measured so far, and its explanation. Advisory for now: the tiers still admit what is read;
// enforcing the plan (partition=auto), re-planning and migration are the next steps of issue 4.
#pragma once

#include <string>

#include "prepfs/cache/tier_manager.h"
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
  unsigned aug_reuse = 1;
  unsigned fuse_threads = 64;
};

// The model's inputs from the mount's counters. Unmeasured costs get stated priors (see the
// report's notes), never a silent 0 that would make a resource look free.
model::Inputs measured_inputs(const PlanSources& s, std::string* notes);

std::string render_plan(const PlanSources& s);

}  // namespace prepfs
