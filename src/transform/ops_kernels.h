// The SIMD kernel behind hflip (ops_simd.cc). Private to src/transform/.
#pragma once

#include "output_view.h"

namespace prepfs::transform::detail {

// Mirrors every row left-right in place.
void mirror_rows(const OutputView& img);

}  // namespace prepfs::transform::detail
