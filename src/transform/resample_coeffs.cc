// Every step (double arithmetic from a float box, truncation of center +- support + 0.5, the
// rounding of the normalised weights) is Pillow's: changing any of them moves some output
// pixels by one level.
#include "resample_coeffs.h"

#include <cmath>

namespace prepfs::transform::detail {
namespace {

double triangle(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

}  // namespace

AxisCoeffs axis_coeffs(int in_size, float in0, float in1, int out_size) {
  constexpr double kSupport = 1.0;  // bilinear
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = kSupport * filterscale;

  AxisCoeffs c;
  c.in_size = in_size;
  c.out_size = out_size;
  c.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<std::size_t>(out_size));
  c.count.resize(static_cast<std::size_t>(out_size));
  c.k.assign(static_cast<std::size_t>(out_size) * static_cast<std::size_t>(c.ksize), 0);
  std::vector<double> w(static_cast<std::size_t>(c.ksize));

  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    // Pillow rounds by truncating (value + 0.5) toward zero.
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double v = triangle((x + xmin - center + 0.5) * ss);
      w[static_cast<std::size_t>(x)] = v;
      ww += v;
    }
    std::int32_t* k = &c.k[static_cast<std::size_t>(xx) * static_cast<std::size_t>(c.ksize)];
    for (int x = 0; x < xmax; ++x) {
      double v = w[static_cast<std::size_t>(x)];
      if (ww != 0.0) v /= ww;
      // normalize_coeffs_8bpc: round half away from zero.
      k[x] = v < 0 ? static_cast<std::int32_t>(-0.5 + v * (1 << kPrecisionBits))
                   : static_cast<std::int32_t>(0.5 + v * (1 << kPrecisionBits));
    }
    c.first[static_cast<std::size_t>(xx)] = xmin;
    c.count[static_cast<std::size_t>(xx)] = xmax;
  }
  return c;
}

}  // namespace prepfs::transform::detail
