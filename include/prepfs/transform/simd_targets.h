// The instruction sets the transform layer's SIMD kernels run on. The kernels are compiled for
// several (AVX-512, AVX2, SSE4 and Highway's portable EMU128 on x86) and dispatched at run time
// to the best one the CPU has; tests and benchmarks pin each in turn to check and compare them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace prepfs::transform {

struct SimdTarget {
  std::int64_t id = 0;  // Highway's target bit (HWY_AVX2, ...)
  std::string name;     // "AVX2", ...
};

// Targets compiled in that this CPU supports, best first; the last is the portable one.
std::vector<SimdTarget> simd_targets();

// Makes the kernels dispatch to `id` (one of simd_targets()) until called again; 0 restores the
// best. Process-wide: for tests and benchmarks, not while other threads run transforms.
void pin_simd_target(std::int64_t id);

// The target the kernels dispatch to now.
SimdTarget active_simd_target();

}  // namespace prepfs::transform
