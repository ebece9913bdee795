// Which forms the shared tier keeps when shared_forms=auto (docs/SCALING.md):
//   raw:     always (the tier exists to spare the one source that all nodes share);
//   decoded: while a shared read of the pixels beats fetching the bytes (from wherever is faster)
//            and decoding them on this node's CPU. Pixels are about 5x the JPEG's bytes, so on a
//            thin link a node decodes rather than pulls them.
// Augmented variants are never shared (each belongs to one node's sequence of opens). Pure: the
// daemon feeds it the profiler's measurements and the shared tier's own timings each tick.
#pragma once

#include <array>
#include <string>

#include "prepfs/common/forms.h"

namespace prepfs {

struct SharedFormInputs {
  double raw_bytes = 0, decoded_bytes = 0;  // mean per sample
  double c_dec = 0;                         // s of CPU per decode
  double src_latency = 0, src_bandwidth = 0;
  // The shared tier's lookup round trip and the bandwidth of the entries it returned; priors
  // (stated in the reason) until it has answered.
  double shared_latency = 0, shared_bandwidth = 0;
  bool shared_measured = false;
  // Whether the tier keeps decoded pixels now: the choice changes only when the other side wins
  // by kSharedFormMargin, so that two near-equal costs measured with noise do not flip it every
  // tick (each flip changes what the nodes look up and publish).
  bool decoded_shared_now = false;
};

inline constexpr double kSharedFormMargin = 0.1;

struct SharedFormChoice {
  std::array<bool, kForms> forms{};
  std::string why;  // one line per form, with the numbers compared
};

// The priors: a memcached round trip on a data-centre network, and a 10 Gb/s link.
inline constexpr double kSharedLatencyPrior = 0.5e-3;
inline constexpr double kSharedBandwidthPrior = 1.25e9;

SharedFormChoice choose_shared_forms(const SharedFormInputs& in);

}  // namespace prepfs
