#include "prepfs/core/plan_report.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include "prepfs/model/solver.h"

namespace prepfs {

model::Inputs measured_inputs(const PlanSources& s, std::string* notes) {
  // One profile for both, so the notes describe exactly the inputs returned.
  Profile p = s.profiler.profile();
  model::Inputs in = p.inputs();
  if (notes) {
    std::string n;
    for (const ProfileNote& note : p.notes) n += "  " + note.input + ": " + note.text + "\n";
    n += "  not measured (unconstrained): consumer rate\n";
    *notes = n;
  }
  return in;
}


}  // namespace prepfs
