// Drift detection: re-plan when a measured input moved past a relative threshold since the plan.
#pragma once

#include <string>

#include "prepfs/model/inputs.h"

namespace prepfs::model {

struct Drift {
  bool drifted = false;
  std::string input;  // the input with the largest relative change ("" if none changed)
  double change = 0;  // |now - then| / |then|; infinity when then == 0 and now != 0
};

// Relative change of one value: 0 when both are 0.
double relative_change(double then, double now);

// The largest relative change over all inputs; drifted when it exceeds threshold (or when the
// view changed).
Drift detect_drift(const Inputs& planned, const Inputs& now, double threshold);

}  // namespace prepfs::model
