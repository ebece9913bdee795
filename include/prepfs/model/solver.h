// The exact planner (docs/MODEL.md): maximise predicted throughput over placements, a linear program
// solved by enumerating its vertices, and the plan's explanation.
#pragma once

#include <array>
#include <string>

#include "prepfs/model/inputs.h"
#include "prepfs/model/partition.h"

namespace prepfs::model {

struct Alternative {
  const char* name;  // "no cache", "all raw", "all decoded", "all augmented"
  Placement placement;
  Prediction prediction;
};

struct Plan {
  Placement placement;                      // integer counts, within the budgets
  Prediction prediction;                    // of placement
  double lp_throughput = 0;                 // the LP's continuous optimum (>= prediction.throughput)
  std::array<Alternative, 4> alternatives;  // no cache, then all raw / decoded / augmented
  bool caching_helps = true;                // false when no placement beats caching nothing
};

// Fill RAM, then SSD, with form f only (the single-form alternatives).
Placement single_form(const Inputs& in, Form f);

// A fixed partition (partition=fixed:...): shares[t][f] of tier t's budget hold form f, so
// n(f,t) = floor(share * budget / S_f); RAM first, then SSD, forms in order raw, decoded,
// augmented, until N samples are placed (each sample in at most one (form, tier)).
Placement fixed_placement(const Inputs& in, const std::array<std::array<double, kForms>, kTiers>& shares);

// The LP's optimum: among optimal placements, the one with the fewest bytes on SSD, then the
// fewest in RAM (so nothing is cached, and no SSD write is spent, when caching cannot help).
// Fractional counts; solve() rounds.
Placement solve_continuous(const Inputs& in);

Plan solve(const Inputs& in);

// Human-readable: inputs, placement, prediction, binding resource, the alternatives, and whether
// caching helps at all.
std::string explain(const Inputs& in, const Plan& plan);

}  // namespace prepfs::model
