#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>

#include <jpeglib.h>

namespace prepfs::transform::testing {

std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& samples, int width, int height, int components,
                                      const EncodeParams& p) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);  // test inputs are valid; libjpeg's exit() is acceptable here
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = components;
  c.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&c);
  if (p.jpeg_space == "rgb") jpeg_set_colorspace(&c, JCS_RGB);
  if (p.jpeg_space == "ycck") jpeg_set_colorspace(&c, JCS_YCCK);
  if (p.jpeg_space == "cmyk") jpeg_set_colorspace(&c, JCS_CMYK);
  if (c.jpeg_color_space == JCS_YCbCr || c.jpeg_color_space == JCS_YCCK) {
    c.comp_info[0].h_samp_factor = p.h_samp;
    c.comp_info[0].v_samp_factor = p.v_samp;
    if (c.jpeg_color_space == JCS_YCCK) {
      c.comp_info[3].h_samp_factor = p.h_samp;
      c.comp_info[3].v_samp_factor = p.v_samp;
    }
  }
  jpeg_set_quality(&c, p.quality, TRUE);
  if (p.progressive) jpeg_simple_progression(&c);
  c.arith_code = p.arithmetic ? TRUE : FALSE;
  c.restart_in_rows = p.restart_rows;
  jpeg_start_compress(&c, TRUE);
  const std::size_t stride = static_cast<std::size_t>(width) * static_cast<std::size_t>(components);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(&samples[c.next_scanline * stride]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<std::uint8_t> out(buf, buf + size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

std::vector<std::uint8_t> synthetic_samples(int width, int height, int components, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> noise(0.0, 10.0);
  std::vector<double> fx(4), fy(4), ph(4);
  for (int c = 0; c < 4; ++c) {
    fx[c] = 0.005 + 0.2 * u(gen);
    fy[c] = 0.005 + 0.2 * u(gen);
    ph[c] = 6.28 * u(gen);
  }
  std::vector<std::uint8_t> s(static_cast<std::size_t>(width) * height * components);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const bool block = ((x / 37) + (y / 23)) % 5 == 0;  // hard edges
      for (int c = 0; c < components; ++c) {
        double v = 127 + 60 * std::sin(x * fx[c] + y * fy[c] + ph[c]) +
                   40.0 * (double(x) / width - double(y) / height) + noise(gen);
        if (block) v = 30 + 50 * c;
        s[(static_cast<std::size_t>(y) * width + x) * components + c] =
            static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return s;
}

Image synthetic_image(int width, int height, std::uint32_t seed) {
  Image img(width, height);
  const std::vector<std::uint8_t> samples = synthetic_samples(width, height, 3, seed);
  img.pixels.assign(samples.begin(), samples.end());
  return img;
}

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void write_file(const std::string& path, const std::vector<std::uint8_t>& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

double ScriptedSource::uniform(double lo, double hi) {
  if (next_ >= draws_.size()) {
    error_ += "more draws than recorded; ";
    return lo;
  }
  const Draw d = draws_[next_++];
  if (d.is_int) error_ += "uniform() where torch drew an integer; ";
  // torch draws in float32; its value may round onto hi, so allow the closed range.
  if (d.u < lo - 1e-6 || d.u > hi + 1e-6) error_ += "uniform draw outside [lo, hi]; ";
  return d.u;
}

std::int64_t ScriptedSource::randint(std::int64_t lo, std::int64_t hi) {
  if (next_ >= draws_.size()) {
    error_ += "more draws than recorded; ";
    return lo;
  }
  const Draw d = draws_[next_++];
  if (!d.is_int) error_ += "randint() where torch drew a float; ";
  if (d.i < lo || d.i >= hi) error_ += "randint draw outside [lo, hi); ";
  return d.i;
}

std::vector<ScriptedSource::Draw> parse_draws(const std::vector<std::string>& tokens) {
  std::vector<ScriptedSource::Draw> out;
  for (const std::string& t : tokens) {
    if (t.size() < 3 || t[1] != ':') throw std::runtime_error("bad draw token " + t);
    if (t[0] == 'u') {
      out.push_back({false, std::strtod(t.c_str() + 2, nullptr), 0});
    } else if (t[0] == 'i') {
      out.push_back({true, 0, std::strtoll(t.c_str() + 2, nullptr, 10)});
    } else {
      throw std::runtime_error("bad draw token " + t);
    }
  }
  return out;
}

double mean_abs_diff(const Image& a, const Image& b) {
  if (a.pixels.size() != b.pixels.size() || a.pixels.empty()) return 1e9;
  double s = 0;
  for (std::size_t i = 0; i < a.pixels.size(); ++i) {
    s += std::abs(int(a.pixels[i]) - int(b.pixels[i]));
  }
  return s / static_cast<double>(a.pixels.size());
}

int for_each_simd_target(const std::function<void(const SimdTarget&)>& f) {
  int n = 0;
  for (const SimdTarget& t : simd_targets()) {
    pin_simd_target(t.id);
    const SimdTarget active = active_simd_target();
    EXPECT_EQ(active.id, t.id) << "pinning " << t.name << " gave " << active.name;
    if (active.id != t.id) continue;
    SCOPED_TRACE(t.name);
    f(t);
    ++n;
  }
  pin_simd_target(0);
  return n;
}

}  // namespace prepfs::transform::testing
