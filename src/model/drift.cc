#include "prepfs/model/drift.h"

#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

namespace prepfs::model {

double relative_change(double then, double now) {
  if (then == now) return 0;
  if (then == 0) return std::numeric_limits<double>::infinity();
  return std::fabs(now - then) / std::fabs(then);
}

namespace {

// The inputs as drift compares them. c_aug is a difference of two measured costs (a variant made
// from the JPEG less a full decode) and sits near zero, or below it, once crop decode makes the two
// cost about the same: its relative change is noise over a tiny base (the bench saw "c_aug changed
// by inf%" re-plan and move a settled placement). What the model charges a render from the JPEG,
// c_dec + c_aug, is the cost that matters, and is compared instead.
std::vector<NamedInput> compared(const Inputs& in) {
  std::vector<NamedInput> v = named_inputs(in);
  for (NamedInput& n : v)
    if (std::string_view(n.name) == "c_aug") {
      n.name = "c_dec + c_aug";
      n.value = in.c_dec + in.c_aug;
    }
  return v;
}

}  // namespace

Drift detect_drift(const Inputs& planned, const Inputs& now, double threshold) {
  Drift d;
  const auto a = compared(planned), b = compared(now);
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
