// Pillow-exact bilinear resampling; the algorithm and its constants are described in resample.h.
// Every arithmetic step (float box, double coefficients, the rounding of the fixed-point weights,
// the +0.5 start of each sum) is kept as in Pillow, because any change moves some output pixels
// by one level and the decoded/augmented views promise byte equality with PIL.
#include "prepfs/transform/resample.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace prepfs::transform {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double triangle(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Per output pixel along one axis: first input index, number of taps, fixed-point weights.
struct Coeffs {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<std::int32_t> k;  // out_size * ksize
};

Coeffs precompute(int in_size, float in0, float in1, int out_size) {
  constexpr double kSupport = 1.0;  // bilinear
  double scale = static_cast<double>(in1 - in0) / out_size;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = kSupport * filterscale;

  Coeffs c;
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

inline std::uint8_t clip8(std::int32_t ss) {
  const std::int32_t v = ss >> kPrecisionBits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// The two passes below are the hot loops of augmentation. They keep Pillow's integer arithmetic
// exactly (8-bit samples times 22-bit weights, summed in int32: the sum cannot overflow since the
// weights are non-negative and add up to 1.0) and only change how it is scheduled: one 4-lane
// vector per RGB pixel (the 4th lane is ignored) in the horizontal pass, 4 samples per vector in
// the vertical one. Integer sums do not depend on the order, so the bytes stay Pillow's.
// target_clones adds an AVX2 build (pmovzxbd/pmulld) chosen at load time; "default" is SSE2.
using v4si = std::int32_t __attribute__((vector_size(16)));

// 4 bytes from p as 4 lanes; the caller guarantees p[3] is inside the buffer.
inline v4si load4(const std::uint8_t* p) { return v4si{p[0], p[1], p[2], p[3]}; }
inline v4si load3(const std::uint8_t* p) { return v4si{p[0], p[1], p[2], 0}; }

// Output row r uses input row r + row_offset.
__attribute__((target_clones("avx2", "default"))) void horizontal(ImageView in, int row_offset, const Coeffs& c,
                                                                  Image& out) {
  const std::int32_t half = 1 << (kPrecisionBits - 1);
  for (int yy = 0; yy < out.height; ++yy) {
    const std::uint8_t* src = in.row(yy + row_offset);
    std::uint8_t* dst = out.row(yy);
    for (int xx = 0; xx < out.width; ++xx) {
      const std::size_t ux = static_cast<std::size_t>(xx);
      const std::int32_t* k = &c.k[ux * static_cast<std::size_t>(c.ksize)];
      const int first = c.first[ux];
      const int n = c.count[ux];
      const std::uint8_t* p = src + static_cast<std::ptrdiff_t>(first) * kChannels;
      // A 4-byte load of the row's last pixel could read past the end of the buffer.
      const int n4 = first + n == in.width ? n - 1 : n;
      v4si s = {half, half, half, half};
      int x = 0;
      for (; x < n4; ++x, p += kChannels) s += load4(p) * k[x];
      if (x < n) s += load3(p) * k[x];
      dst[3 * xx + 0] = clip8(s[0]);
      dst[3 * xx + 1] = clip8(s[1]);
      dst[3 * xx + 2] = clip8(s[2]);
    }
  }
}

// first[] of c is relative to row_base of `in` (Pillow shifts the bounds after the first pass).
__attribute__((target_clones("avx2", "default"))) void vertical(ImageView in, int row_base, const Coeffs& c,
                                                                Image& out) {
  const std::int32_t half = 1 << (kPrecisionBits - 1);
  const int row_len = out.width * kChannels;
  const int nvec = row_len / 4;
  std::vector<v4si> acc(static_cast<std::size_t>(nvec) + 1);
  for (int yy = 0; yy < out.height; ++yy) {
    const std::size_t uy = static_cast<std::size_t>(yy);
    const std::int32_t* k = &c.k[uy * static_cast<std::size_t>(c.ksize)];
    for (auto& a : acc) a = v4si{half, half, half, half};
    // Row-major accumulation: the same integer sums as Pillow's per-pixel loop.
    for (int y = 0; y < c.count[uy]; ++y) {
      const std::uint8_t* src = in.row(c.first[uy] - row_base + y);
      const std::int32_t ky = k[y];
      for (int v = 0; v < nvec; ++v) {
        acc[static_cast<std::size_t>(v)] += load4(src + 4 * v) * ky;
      }
      for (int i = 4 * nvec; i < row_len; ++i) {
        acc[static_cast<std::size_t>(nvec)][i - 4 * nvec] += src[i] * ky;
      }
    }
    std::uint8_t* dst = out.row(yy);
    for (int i = 0; i < row_len; ++i) {
      dst[i] = clip8(acc[static_cast<std::size_t>(i / 4)][i % 4]);
    }
  }
}

}  // namespace

Image resize_bilinear(ImageView src, int out_w, int out_h) {
  return resize_bilinear(src, out_w, out_h,
                         BoxF{0, 0, static_cast<double>(src.width), static_cast<double>(src.height)});
}

Image resize_bilinear(ImageView src, int out_w, int out_h, BoxF box_d) {
  if (out_w < 1 || out_h < 1 || src.width < 1 || src.height < 1) {
    throw std::invalid_argument("resize_bilinear: empty image");
  }
  const float box[4] = {static_cast<float>(box_d.x0), static_cast<float>(box_d.y0), static_cast<float>(box_d.x1),
                        static_cast<float>(box_d.y1)};
  if (box[0] < 0 || box[1] < 0 || box[2] > static_cast<float>(src.width) || box[3] > static_cast<float>(src.height) ||
      box[2] - box[0] < 0 || box[3] - box[1] < 0) {
    throw std::invalid_argument("resize_bilinear: box outside the image");
  }
  // Pillow's Image.resize returns a copy when nothing changes.
  if (out_w == src.width && out_h == src.height && box[0] == 0 && box[1] == 0 &&
      box[2] == static_cast<float>(src.width) && box[3] == static_cast<float>(src.height)) {
    return copy_image(src);
  }
  // ImagingResampleInner's tests, including the comparison of box[2] with the output size.
  const bool need_h = out_w != src.width || box[0] != 0 || box[2] != static_cast<float>(out_w);
  const bool need_v = out_h != src.height || box[1] != 0 || box[3] != static_cast<float>(out_h);

  Coeffs cv = precompute(src.height, box[1], box[3], out_h);
  const int ybox_first = cv.first[0];
  const std::size_t last = static_cast<std::size_t>(out_h - 1);
  const int ybox_last = cv.first[last] + cv.count[last];

  ImageView cur = src;
  int cur_row_base = 0;  // which source row cur.row(0) is
  Image tmp;
  if (need_h) {
    Coeffs ch = precompute(src.width, box[0], box[2], out_w);
    tmp = Image(out_w, ybox_last - ybox_first);
    horizontal(src, ybox_first, ch, tmp);
    cur = tmp.view();
    cur_row_base = ybox_first;
  }
  if (need_v) {
    Image out(cur.width, out_h);
    vertical(cur, cur_row_base, cv, out);
    return out;
  }
  // Only the horizontal pass ran (the vertical box spans the image rows exactly).
  return tmp;
}

}  // namespace prepfs::transform
