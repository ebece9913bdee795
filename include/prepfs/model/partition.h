// A placement n(f,t) of samples over forms and tiers, and the model that predicts its throughput
// (docs/MODEL.md). Pure arithmetic: no I/O, no FUSE.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "prepfs/model/inputs.h"

namespace prepfs::model {

// n(f,t): samples cached in form f in tier t. Doubles so the LP's fractional optimum fits too;
// the planner's final placement holds integers. Each sample is cached in at most one (form, tier).
struct Placement {
  std::array<std::array<double, kTiers>, kForms> n{};

  double& at(Form f, Tier t) { return n[static_cast<std::size_t>(f)][static_cast<std::size_t>(t)]; }
  double at(Form f, Tier t) const { return n[static_cast<std::size_t>(f)][static_cast<std::size_t>(t)]; }
  double total() const;                          // sum over f,t
  double bytes(const Inputs& in, Tier t) const;  // sum_f n(f,t) * S_f
};

// Capacity constraints: n >= 0, bytes per tier within budget, sum_{f,t} n(f,t) <= N.
// tolerance is relative (to the budget, and to N).
bool feasible(const Inputs& in, const Placement& p, double tolerance = 1e-9);

enum class Resource { kCpu = 0, kSsd, kSourceBytes, kSourceRequests, kCopy, kConsumer };
inline constexpr std::size_t kResources = 6;
const char* resource_name(Resource r);

// Per-request (per sample served through the consumer's view) usage.
struct Usage {
  double cpu_s = 0;
  double ssd_read_bytes = 0;
  double ssd_write_bytes = 0;  // refills of augmented variants that live on SSD
  double source_bytes = 0;
  double source_requests = 0;
  double copy_bytes = 0;
};

struct Prediction {
  Usage usage;
  // Per resource: seconds of that resource per request (usage / capacity; for the SSD the sum of
  // read and write time), and the samples/s it allows (infinity when unconstrained or unused).
  std::array<double, kResources> load{};
  std::array<double, kResources> rate{};
  double throughput = 0;  // min over resources of rate, samples/s
  Resource binding = Resource::kCpu;
};

// The placement alone: what the planner optimises (a linear program, below).
Prediction predict(const Inputs& in, const Placement& p);

// The RAM a placement leaves free is not idle: the RAM tier keeps its recent fills there (the
// fills no tier keeps, least recently used out), so a sample the placement does not keep may
// still find its variant of the moment, its pixels or its bytes there at its next serve
// (docs/MODEL.md, "The free room").
struct FreeRoom {
  double room = 0;                 // bytes the recent fills hold: the budget the placement leaves, at least the floor
  double touched = 0;              // bytes put (or touched again) among them per request
  double variant_survival = 0;     // P(a variant outside the tiers is still there at its next serve)
  double decoded_survival = 0;     // the same for pixels (decoded/ view)
  double raw_survival = 0;         // the same for an uncached sample's bytes at its next render
  double refill_raw_survival = 0;  // the same for the bytes of a placed variant's next refill, R serves later
  double renders = 1;              // renders (decodes, for decoded/) per request of a sample no tier keeps in that form
  double outside = 0;              // share of requests whose view's form no tier keeps (their fills go there)
};
FreeRoom free_room(const Inputs& in, const Placement& p);

// predict() plus what the recent fills in the free room save: the throughput to expect of the
// placement, which the mount reports (plan.json, prepctl plan). The planner does not optimise it:
// at best the free room does for the samples it holds what placing them would, and the plan's
// entries, unlike recent fills, are kept on purpose and survive a restart on the SSD.
Prediction predict_with_free_room(const Inputs& in, const Placement& p);
// The same, with free_room(in, p) computed already (a report that shows both).
Prediction predict_with_free_room(const Inputs& in, const Placement& p, const FreeRoom& fr);

// The same usage as an affine function of the fractions x(f,t) = n(f,t)/N:
// load_r(x) = base[r] + sum_{f,t} coef[r][f*kTiers+t] * x(f,t). Unconstrained resources have
// constrained[r] == false. predict() is built on it, and the solver uses it as its LP rows.
struct LinearLoad {
  std::array<double, kResources> base{};
  std::array<std::array<double, kForms * kTiers>, kResources> coef{};
  std::array<bool, kResources> constrained{};
  Usage usage_base;
  std::array<Usage, kForms * kTiers> usage_coef;
};
LinearLoad linear_load(const Inputs& in);

}  // namespace prepfs::model
