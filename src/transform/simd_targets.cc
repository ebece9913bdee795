#include "prepfs/transform/simd_targets.h"

#include <hwy/targets.h>

#include "resample_kernels.h"

namespace prepfs::transform {

std::vector<SimdTarget> simd_targets() {
  std::vector<SimdTarget> out;
  for (const std::int64_t t : hwy::SupportedAndGeneratedTargets()) out.push_back({t, hwy::TargetName(t)});
  return out;
}

void pin_simd_target(std::int64_t id) { hwy::SetSupportedTargetsForTest(id); }

SimdTarget active_simd_target() {
  const std::int64_t t = detail::simd_dispatch_target();
  return {t, hwy::TargetName(t)};
}

}  // namespace prepfs::transform
