#include "prepfs/core/plan_report.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include "prepfs/model/solver.h"

namespace prepfs {
namespace {

double mean_ns(uint64_t total_ns, uint64_t count) { return count ? double(total_ns) / 1e9 / double(count) : 0; }

}  // namespace

model::Inputs measured_inputs(const PlanSources& s, std::string* notes) {
  model::Inputs in;
  double raw_bytes = 0, decoded_bytes = 0, images = 0;
  uint32_t first_image = 0;
  for (uint32_t id = 0; id < s.tree.size(); id++) {
    if (!S_ISREG(s.tree.node(id).mode) || !s.tree.dims(id).is_image()) continue;
    if (images == 0) first_image = id;
    images++;
    raw_bytes += double(s.tree.version(id).size);
    decoded_bytes += double(s.renderer.decoded_size(id));
  }
  in.samples = images;
  if (images > 0) {
    in.size = {raw_bytes / images, decoded_bytes / images, double(s.renderer.augmented_size(first_image))};
  }
  in.ram_capacity = double(s.cache.ram().budget());
  in.ssd_capacity = s.cache.ssd() ? double(s.cache.ssd()->budget()) : 0;

  // Source: mean time per read request at the concurrency the FUSE workers allow.
  const SourceCounters& sc = s.source.counters();
  if (load(sc.reads) > 0) {
    in.src_latency = mean_ns(load(sc.read_ns), load(sc.reads));
    in.src_concurrency = s.fuse_threads;
  }

  // CPU per sample, from thread CPU time of the renders of each kind.
  const RenderCounters& rc = s.renderer.counters();
  uint64_t from_jpeg = load(rc.augmented) - load(rc.from_decoded);
  double dec = mean_ns(load(rc.decode_cpu_ns), load(rc.decoded));
  double aug_jpeg = mean_ns(load(rc.augment_cpu_ns), from_jpeg);
  double aug_dec = mean_ns(load(rc.augment_from_decoded_cpu_ns), load(rc.from_decoded));
  std::string n;
  // Priors where nothing was measured yet, from bench/results/loader_bench.md on this machine
  // class (decode 1.3 ms, augment from pixels 0.45x of a whole render).
  if (dec == 0 && aug_jpeg > 0) { dec = 0.6 * aug_jpeg; n += "  c_dec: prior 0.6 x the measured augment-from-JPEG cost\n"; }
  if (dec == 0) { dec = 1.3e-3; n += "  c_dec: prior 1.3 ms (nothing decoded yet)\n"; }
  if (aug_jpeg == 0) { aug_jpeg = dec / 0.6; n += "  c_dec + c_aug: prior c_dec / 0.6 (nothing augmented yet)\n"; }
  if (aug_dec == 0) { aug_dec = 0.45 * aug_jpeg; n += "  c_aug from decoded: prior 0.45 x augment-from-JPEG\n"; }
  in.c_dec = dec;
  in.c_aug = std::max(0.0, aug_jpeg - dec);
  in.c_aug_from_decoded = aug_dec;
  in.cores = s.renderer.config().cpu;
  in.aug_reuse = s.aug_reuse;
  in.view = model::Form::kAugmented;
  n += "  not measured yet (unconstrained): source bandwidth, SSD bandwidth, FUSE copy bandwidth, consumer rate\n";
  if (notes) *notes = n;
  return in;
}

std::string render_plan(const PlanSources& s) {
  std::string notes;
  model::Inputs in = measured_inputs(s, &notes);
  if (in.samples == 0) return "prepfs plan: the source has no images; nothing to plan.\n";
  model::Plan plan = model::solve(in);
  return "prepfs plan (advisory: this build admits what is read; enforcing the plan is the next step)\n\n" +
         model::explain(in, plan) + "\nAssumptions about inputs:\n" + notes;
}

}  // namespace prepfs
