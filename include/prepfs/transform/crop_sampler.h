// Geometry of the augment ops, computed exactly as torchvision 0.14 computes it for PIL images.
// Only positions and sizes live here; pixels are touched in ops.h and resample.h.
//
// RandomResizedCrop.get_params (torchvision/transforms/transforms.py):
//   area = H * W; log_ratio = log(float32(ratio))            (float32, as torch.log of a tensor)
//   10 times: target_area = area * U(scale_lo, scale_hi)
//             aspect      = exp(U(log_ratio_lo, log_ratio_hi))  (float32 exp)
//             w = round(sqrt(target_area * aspect)); h = round(sqrt(target_area / aspect))
//             if 0 < w <= W and 0 < h <= H:
//                 i = randint(0, H - h + 1); j = randint(0, W - w + 1); return (i, j, h, w)
//   fallback: the whole image, narrowed to the nearest allowed ratio, centred ((H - h) // 2).
// round() is Python's: halves to even. The draws come from a RandomSource in exactly this order,
// so replaying torch's recorded draws reproduces torchvision's boxes.
#pragma once

#include "prepfs/transform/rng.h"

namespace prepfs::transform {

// torchvision's (i, j, h, w): top row, left column, height, width.
struct CropBox {
  int top = 0;
  int left = 0;
  int height = 0;
  int width = 0;
  friend bool operator==(const CropBox&, const CropBox&) = default;
};

struct RrcParams {
  double scale_lo = 0.08;
  double scale_hi = 1.0;
  double ratio_lo = 3.0 / 4.0;
  double ratio_hi = 4.0 / 3.0;
};

CropBox sample_rrc_box(int width, int height, const RrcParams& p, RandomSource& rs);

// Python's round() for the values that occur here: nearest integer, halves to even.
double round_half_even(double v);

// torchvision F.center_crop: where the crop starts in the source, possibly negative (the source
// is zero-padded where the crop extends beyond it).
struct CenterCrop {
  int top = 0;   // source row of output row 0
  int left = 0;  // source column of output column 0
  int height = 0;
  int width = 0;
};
CenterCrop center_crop_geometry(int width, int height, int crop_h, int crop_w);

// torchvision Resize(N) on a W x H image: the shorter side becomes N, the longer
// int(N * long / short). Returns {out_w, out_h}.
struct Size {
  int width = 0;
  int height = 0;
  friend bool operator==(const Size&, const Size&) = default;
};
Size resize_shorter_size(int width, int height, int shorter);

}  // namespace prepfs::transform
