#include "prepfs/model/drift.h"

#include <cmath>
#include <limits>

namespace prepfs::model {

double relative_change(double then, double now) {
  if (then == now) return 0;
  if (then == 0) return std::numeric_limits<double>::infinity();
  return std::fabs(now - then) / std::fabs(then);
}

Drift detect_drift(const Inputs& planned, const Inputs& now, double threshold) {
  Drift d;
  const auto a = named_inputs(planned), b = named_inputs(now);
  for (std::size_t i = 0; i < a.size(); i++) {
    const double c = relative_change(a[i].value, b[i].value);
    if (c > d.change) {
      d.change = c;
      d.input = a[i].name;
    }
  }
  d.drifted = d.change > threshold;
  if (planned.view != now.view) {
    d.drifted = true;
    d.input = "view";
    d.change = std::numeric_limits<double>::infinity();
  }
  return d;
}

}  // namespace prepfs::model
