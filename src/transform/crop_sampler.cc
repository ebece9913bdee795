// torchvision-exact crop geometry; see crop_sampler.h for the algorithm being reproduced.
#include "prepfs/transform/crop_sampler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace prepfs::transform {

double round_half_even(double v) { return std::nearbyint(v); }  // default mode: ties to even

CropBox sample_rrc_box(int width, int height, const RrcParams& p, RandomSource& rs) {
  if (width < 1 || height < 1) throw std::invalid_argument("sample_rrc_box: empty image");
  const double area = static_cast<double>(height) * width;
  // torch.log(torch.tensor(ratio)): float32 in, float32 out.
  const float log_lo = std::log(static_cast<float>(p.ratio_lo));
  const float log_hi = std::log(static_cast<float>(p.ratio_hi));
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rs.uniform(p.scale_lo, p.scale_hi);
    // torch.exp of a float32 tensor, then .item() widens to double.
    const float lr = static_cast<float>(rs.uniform(log_lo, log_hi));
    const double aspect = static_cast<double>(std::exp(lr));
    const double wf = round_half_even(std::sqrt(target_area * aspect));
    const double hf = round_half_even(std::sqrt(target_area / aspect));
    if (0 < wf && wf <= width && 0 < hf && hf <= height) {
      const int w = static_cast<int>(wf);
      const int h = static_cast<int>(hf);
      const int i = static_cast<int>(rs.randint(0, height - h + 1));
      const int j = static_cast<int>(rs.randint(0, width - w + 1));
      return CropBox{i, j, h, w};
    }
  }
  // Fallback to a central crop (min/max of the Python tuple, in double).
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  const double rmin = std::min(p.ratio_lo, p.ratio_hi);
  const double rmax = std::max(p.ratio_lo, p.ratio_hi);
  int w = width, h = height;
  if (in_ratio < rmin) {
    h = static_cast<int>(round_half_even(w / rmin));
  } else if (in_ratio > rmax) {
    w = static_cast<int>(round_half_even(h * rmax));
  }
  // A ratio range far from the image's rounds the narrowed side to 0, and torchvision hands PIL
  // an empty crop. Keep one row or column instead: a spec the parser accepts must give an image.
  h = std::max(h, 1);
  w = std::max(w, 1);
  // Python floor division; both differences are >= 0 here.
  return CropBox{(height - h) / 2, (width - w) / 2, h, w};
}

CenterCrop center_crop_geometry(int width, int height, int crop_h, int crop_w) {
  // F.center_crop pads with zeros first when the crop is larger than the image, left/top
  // getting the smaller half, then crops the padded image at round((size - crop) / 2).
  int pad_left = 0, pad_top = 0;
  int pw = width, ph = height;
  if (crop_w > width || crop_h > height) {
    if (crop_w > width) {
      pad_left = (crop_w - width) / 2;
      pw = width + pad_left + (crop_w - width + 1) / 2;
    }
    if (crop_h > height) {
      pad_top = (crop_h - height) / 2;
      ph = height + pad_top + (crop_h - height + 1) / 2;
    }
    if (pw == crop_w && ph == crop_h) return CenterCrop{-pad_top, -pad_left, crop_h, crop_w};
  }
  const int top = static_cast<int>(round_half_even((ph - crop_h) / 2.0));
  const int left = static_cast<int>(round_half_even((pw - crop_w) / 2.0));
  return CenterCrop{top - pad_top, left - pad_left, crop_h, crop_w};
}

Size resize_shorter_size(int width, int height, int shorter) {
  const bool w_short = width <= height;
  const int s = w_short ? width : height;
  const int l = w_short ? height : width;
  // Python: int(N * long / short), a true division of exact integers, then truncation.
  const int new_long =
      static_cast<int>(static_cast<double>(static_cast<long long>(shorter) * l) / static_cast<double>(s));
  return w_short ? Size{shorter, new_long} : Size{new_long, shorter};
}

}  // namespace prepfs::transform
