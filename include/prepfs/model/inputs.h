// The partition model's measured inputs (docs/MODEL.md). A plain struct: the profiler fills it from
// EWMAs, the planner reads it. Units are bytes, seconds and samples; a capacity of 0 means "not
// measured" and leaves that resource unconstrained.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "prepfs/common/forms.h"

namespace prepfs::model {

// Form and Tier are the whole daemon's vocabulary (common/forms.h).

struct Inputs {
  // Mean entry size S_f of each form, bytes, indexed by Form.
  std::array<double, kForms> size{0, 0, 0};
  double samples = 0;  // N, samples in the dataset

  // Tier budgets, bytes (configuration rather than measurement, but the planner needs them).
  double ram_capacity = 0;
  double ssd_capacity = 0;
  // The RAM tier's whole budget, for the recent fills (predict_with_free_room): they use what the
  // placement leaves of it, while ram_capacity may be a planning share of it (budget x headroom).
  // 0: ram_capacity.
  double ram_budget = 0;
  // The least room the recent fills keep whatever the placement takes (RamTier::kRecentFloor).
  double recent_floor = 0;

  // The source: bandwidth B_src (bytes/s), per-request latency L_src (s) at concurrency C_src.
  // Request capacity is C_src / L_src requests/s.
  double src_bandwidth = 0;
  double src_latency = 0;
  double src_concurrency = 1;

  double ssd_read_bw = 0;   // bytes/s
  double ssd_write_bw = 0;  // bytes/s

  // CPU seconds per sample: decode, augment from decoded pixels produced by that decode (c_aug),
  // and augment from cached decoded pixels (c_aug_from_decoded, which skips unpacking the entry).
  double c_dec = 0;
  double c_aug = 0;
  double c_aug_from_decoded = 0;
  double cores = 1;  // P, cores the daemon may use for transforms

  double copy_bw = 0;  // FUSE/memory copy bandwidth, bytes/s

  // The consumer's own rate limit in samples/s (0 = unknown, unlimited).
  double consumer_rate = 0;

  Form view = Form::augmented;  // the view the consumer reads
  double aug_reuse = 1;         // R: each augmented variant is served at most R times

  double size_of(Form f) const { return size[static_cast<std::size_t>(f)]; }
  // With aug_reuse > 1, a sample kept decoded in RAM also keeps the variant of the moment beside
  // its pixels until the variant's last serve (SampleStore admits it there): one render from the
  // pixels serves R requests. So such a slot holds S_dec + S_aug.
  bool variant_beside_pixels() const { return view == Form::augmented && aug_reuse > 1; }
  double slot_size(Form f, Tier t) const {
    const bool beside = f == Form::decoded && t == Tier::ram && variant_beside_pixels();
    return size_of(f) + (beside ? size_of(Form::augmented) : 0);
  }
  double src_request_rate() const {  // C_src / L_src, 0 when not measured
    return src_latency > 0 ? src_concurrency / src_latency : 0;
  }
};

// Every numeric input with a stable name, for drift detection and the explanation.
struct NamedInput {
  const char* name;
  const char* unit;
  double value;
};
std::vector<NamedInput> named_inputs(const Inputs& in);

}  // namespace prepfs::model
