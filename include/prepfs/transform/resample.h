// Resizing exactly as Pillow 9.4's Image.resize(size, Image.BILINEAR, box) does it
// (src/libImaging/Resample.c), so that the augmented view equals torchvision-on-PIL byte for byte.
//
// The algorithm, for each axis separately:
//  - scale = (box_end - box_start) / out_size; when downscaling (scale > 1) the triangle filter is
//    widened by the scale (support = scale), which is Pillow's antialiasing;
//  - output pixel i is centred at box_start + (i + 0.5) * scale; its taps are the input pixels
//    [int(center - support + 0.5), int(center + support + 0.5)) clipped to the image, weighted by
//    triangle((x - center + 0.5) / filterscale) and normalised to sum 1;
//  - weights become fixed point with 22 fractional bits (PRECISION_BITS = 32 - 8 - 2), rounded
//    half away from zero; each sum starts at 0.5 (1 << 21) and is clipped to 0..255 after >> 22;
//  - the horizontal pass runs first, over only the rows the vertical pass will read; a pass is
//    skipped when its axis keeps its size and the box spans it exactly.
// The box is float in Pillow (C float[4]); we narrow it the same way.
//
// The order of the passes is part of the result: each pass rounds to 8 bits, so running the
// vertical pass first (which would touch fewer rows when shrinking vertically) gives other
// bytes; test_resample.cc shows a case.
#pragma once

#include "prepfs/transform/image.h"

namespace prepfs::transform {

struct BoxF {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // in source pixels; x1/y1 exclusive
};

// Which implementation of the two passes runs. Both give the same bytes.
enum class ResampleKernel {
  kSimd,       // vectorised, dispatched at run time to the CPU's best instruction set
  kReference,  // the pre-SIMD kernels, one output pixel at a time (baseline for benchmarks)
};

// Bilinear (antialiased when shrinking) resize of the whole view to out_w x out_h.
Image resize_bilinear(ImageView src, int out_w, int out_h, ResampleKernel kernel = ResampleKernel::kSimd);

// Same, reading the region `box` of src (Pillow's resize(..., box=box)); pixels outside the box
// but inside src may contribute near the box edges, exactly as in Pillow.
Image resize_bilinear(ImageView src, int out_w, int out_h, BoxF box, ResampleKernel kernel = ResampleKernel::kSimd);

}  // namespace prepfs::transform
