// Byte-for-byte comparisons with PIL, numpy and torchvision, on references that
// pil_reference.py generates at test time (see its docstring for the MANIFEST format).
//
// These tests FAIL when PREPFS_XF_FIXTURES is unset: they must never pass without references.
// When Python lacks PIL/numpy/torchvision the wrapper script exits 77 before running them, which
// meson reports as SKIP.
#include "prepfs/transform/augment.h"
#include "prepfs/transform/encoders.h"
#include "prepfs/transform/error.h"
#include "prepfs/transform/jpeg_decode.h"
#include "prepfs/transform/jpeg_header.h"
#include "prepfs/transform/ops.h"
#include "prepfs/transform/pipeline_spec.h"
#include "prepfs/transform/render.h"
#include "prepfs/transform/resample.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <span>
#include <sstream>

namespace prepfs::transform {
namespace {

using namespace testing;  // NOLINT: the test helpers

std::string fixtures_dir() {
  const char* d = std::getenv("PREPFS_XF_FIXTURES");
  return d ? d : "";
}

#define REQUIRE_FIXTURES()                                                               \
  const std::string dir = fixtures_dir();                                                \
  if (dir.empty()) {                                                                     \
    FAIL() << "PREPFS_XF_FIXTURES is not set: run this through pil_reference.py (meson " \
              "test transform_pil / transform_torchvision)";                             \
  }

std::vector<std::vector<std::string>> manifest(const std::string& dir, const char* name) {
  std::ifstream f(dir + "/" + name);
  std::vector<std::vector<std::string>> lines;
  std::string line;
  while (std::getline(f, line)) {
    const std::size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream is(line);
    std::vector<std::string> toks;
    for (std::string t; is >> t;) toks.push_back(t);
    if (!toks.empty()) lines.push_back(std::move(toks));
  }
  return lines;
}

std::vector<std::uint8_t> jpeg_of(const std::string& dir, const std::string& name) {
  return read_file(dir + "/" + name + ".jpg");
}

// Index of the first differing byte, for failure messages.
std::string first_diff(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  if (a.size() != b.size()) {
    return "sizes " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  }
  std::size_t n = 0, first = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && n++ == 0) first = i;
  }
  if (n == 0) return "equal";
  return std::to_string(n) + " bytes differ, first at " + std::to_string(first) + " (" + std::to_string(a[first]) +
         " vs " + std::to_string(b[first]) + ")";
}

// ------------------------------------------------------------------------------------ decode

TEST(PilReference, DecodeEqualsPilForEveryFixtureAndErrorsWhenPilDoes) {
  REQUIRE_FIXTURES();
  int decoded = 0, errors = 0;
  for (const auto& t : manifest(dir, "MANIFEST")) {
    if (t[0] == "decode") {
      SCOPED_TRACE(t[1]);
      const auto data = jpeg_of(dir, t[1]);
      Image img;
      try {
        img = decode_jpeg(data);
      } catch (const DecodeError& e) {
        ADD_FAILURE() << t[1] << ": PIL decodes it but we fail: " << e.what();
        continue;
      }
      EXPECT_EQ(img.width, std::stoi(t[2]));
      EXPECT_EQ(img.height, std::stoi(t[3]));
      const auto ref = read_file(dir + "/" + t[1] + ".rgb");
      EXPECT_TRUE(std::ranges::equal(img.pixels, ref)) << t[1] << ": " << first_diff(img.pixels, ref);
      ++decoded;
    } else if (t[0] == "error") {
      SCOPED_TRACE(t[1]);
      const auto data = jpeg_of(dir, t[1]);
      try {
        const Image img = decode_jpeg(data);
        ADD_FAILURE() << t[1] << ": PIL raises but we decoded " << img.width << "x" << img.height;
      } catch (const DecodeError& e) {
        EXPECT_EQ(e.err(), EIO);
      }
      ++errors;
    }
  }
  EXPECT_GE(decoded, 40);  // the manifest really was read
  EXPECT_GE(errors, 30);
  std::printf("decode vs PIL: %d images byte-identical, %d PIL errors matched\n", decoded, errors);
}

TEST(PilReference, HeaderDimensionsFromAPrefixMatchPil) {
  REQUIRE_FIXTURES();
  int n = 0;
  for (const auto& t : manifest(dir, "MANIFEST")) {
    if (t[0] != "decode") continue;
    const auto data = jpeg_of(dir, t[1]);
    std::size_t len = std::min<std::size_t>(data.size(), 512);  // start small on purpose
    HeaderResult r;
    for (;;) {
      r = parse_jpeg_header(std::span(data.data(), len), len == data.size());
      if (r.status != HeaderResult::Status::kNeedMore) break;
      ASSERT_GT(r.need_bytes, len) << t[1];
      len = std::min(data.size(), r.need_bytes);
    }
    ASSERT_EQ(r.status, HeaderResult::Status::kOk) << t[1] << ": " << r.message;
    EXPECT_EQ(r.info.width, std::stoul(t[2])) << t[1];
    EXPECT_EQ(r.info.height, std::stoul(t[3])) << t[1];
    ++n;
  }
  EXPECT_GE(n, 40);
}

// JPEG flavours PIL cannot write: made here with libjpeg, decoded by PIL through the script.
TEST(PilReference, LibjpegMadeVariantsEqualPil) {
  REQUIRE_FIXTURES();
  const char* py = std::getenv("PREPFS_XF_PYTHON");
  const char* script = std::getenv("PREPFS_XF_REF_SCRIPT");
  ASSERT_TRUE(py && script);
  struct Case {
    const char* name;
    int w, h, comps;
    EncodeParams p;
  };
  std::vector<Case> cases;
  const auto add = [&](const char* n, int w, int h, int comps, auto tweak) {
    EncodeParams p;
    tweak(p);
    cases.push_back({n, w, h, comps, p});
  };
  add("ycck", 123, 77, 4, [](EncodeParams& p) { p.jpeg_space = "ycck"; });
  add("ycck_progressive", 64, 48, 4, [](EncodeParams& p) {
    p.jpeg_space = "ycck";
    p.progressive = true;
  });
  add("cmyk_plain", 50, 41, 4, [](EncodeParams& p) { p.jpeg_space = "cmyk"; });
  add("rgb_space", 99, 70, 3, [](EncodeParams& p) { p.jpeg_space = "rgb"; });
  add("arith", 130, 90, 3, [](EncodeParams& p) { p.arithmetic = true; });
  add("arith_progressive", 130, 90, 3, [](EncodeParams& p) {
    p.arithmetic = true;
    p.progressive = true;
  });
  add("restart", 211, 133, 3, [](EncodeParams& p) { p.restart_rows = 1; });
  add("h1v2", 101, 67, 3, [](EncodeParams& p) {
    p.h_samp = 1;
    p.v_samp = 2;
  });
  add("h4v1", 101, 67, 3, [](EncodeParams& p) {
    p.h_samp = 4;
    p.v_samp = 1;
  });
  add("h2v1_progressive", 90, 90, 3, [](EncodeParams& p) {
    p.h_samp = 2;
    p.v_samp = 1;
    p.progressive = true;
  });
  add("gray_restart", 80, 80, 1, [](EncodeParams& p) { p.restart_rows = 2; });
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto jpeg = encode_jpeg(synthetic_samples(c.w, c.h, c.comps, 7), c.w, c.h, c.comps, c.p);
    const std::string in = dir + "/cc_" + c.name + ".jpg";
    const std::string out = dir + "/cc_" + c.name + ".rgb";
    write_file(in, jpeg);
    const std::string cmd = std::string(py) + " '" + script + "' decode '" + in + "' '" + out + "'";
    const int rc = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(rc)) << cmd;
    ASSERT_EQ(WEXITSTATUS(rc), 0) << "PIL could not decode " << c.name;
    const Image img = decode_jpeg(jpeg);
    const auto ref = read_file(out);
    EXPECT_TRUE(std::ranges::equal(img.pixels, ref)) << c.name << ": " << first_diff(img.pixels, ref);
  }
}

// ------------------------------------------------------------------------------ encoders

TEST(PilReference, PpmAndNpyBytesEqualPilAndNumpy) {
  REQUIRE_FIXTURES();
  int n = 0;
  for (const auto& t : manifest(dir, "MANIFEST")) {
    if (t[0] != "decode") continue;
    SCOPED_TRACE(t[1]);
    const Image img = decode_jpeg(jpeg_of(dir, t[1]));
    const auto ppm = encode(OutputFormat::kPpm, img.view());
    const auto npy = encode(OutputFormat::kNpy, img.view());
    const auto pil_ppm = read_file(dir + "/" + t[1] + ".ppm");
    const auto np_npy = read_file(dir + "/" + t[1] + ".npy");
    EXPECT_TRUE(ppm == pil_ppm) << "PPM vs PIL's: " << first_diff(ppm, pil_ppm);
    EXPECT_TRUE(npy == np_npy) << "NPY vs numpy.save: " << first_diff(npy, np_npy);
    EXPECT_TRUE(render_decoded(jpeg_of(dir, t[1]), OutputFormat::kPpm) == pil_ppm);
    EXPECT_EQ(encoded_size(OutputFormat::kPpm, img.width, img.height), pil_ppm.size());
    EXPECT_EQ(encoded_size(OutputFormat::kNpy, img.width, img.height), np_npy.size());
    // For the round trip through PIL.open / numpy.load done by the script afterwards.
    write_file(dir + "/ours/" + t[1] + ".ppm", ppm);
    write_file(dir + "/ours/" + t[1] + ".npy", npy);
    ++n;
  }
  EXPECT_GE(n, 40);
}

// ------------------------------------------------------------------------------ resampling

TEST(PilReference, ResizeEqualsPilBilinear) {
  REQUIRE_FIXTURES();
  std::map<std::string, Image> decoded;
  int n = 0;
  for (const auto& t : manifest(dir, "MANIFEST")) {
    if (t[0] != "resize" && t[0] != "resizebox") continue;
    auto it = decoded.find(t[1]);
    if (it == decoded.end()) it = decoded.emplace(t[1], decode_jpeg(jpeg_of(dir, t[1]))).first;
    const Image& src = it->second;
    Image out;
    if (t[0] == "resize") {
      const int l = std::stoi(t[2]), tp = std::stoi(t[3]), w = std::stoi(t[4]), h = std::stoi(t[5]);
      out = resize_bilinear(src.view().sub(l, tp, w, h), std::stoi(t[6]), std::stoi(t[7]));
    } else {
      const BoxF box{std::stod(t[2]), std::stod(t[3]), std::stod(t[4]), std::stod(t[5])};
      out = resize_bilinear(src.view(), std::stoi(t[6]), std::stoi(t[7]), box);
    }
    const auto ref = read_file(dir + "/" + t[8]);
    std::string line;
    for (const auto& s : t) line += s + " ";
    EXPECT_TRUE(std::ranges::equal(out.pixels, ref)) << line << ": " << first_diff(out.pixels, ref);
    ++n;
  }
  EXPECT_GE(n, 200);
  std::printf("resize vs PIL: %d cases compared\n", n);
}

// Every kernel against PIL: the reference kernels and the SIMD kernels pinned to each target
// this machine has, the portable fallback included, on the random geometry of pil_reference.py
// (1-pixel crops, odd sizes, up- and downscales by up to 40x, float boxes and flips, on RGB,
// grayscale and CMYK sources).
TEST(PilReference, ResizeEqualsPilOnEveryKernelAndTarget) {
  REQUIRE_FIXTURES();
  std::map<std::string, Image> decoded;
  std::vector<std::vector<std::string>> cases;
  for (const auto& t : manifest(dir, "MANIFEST")) {
    if (t[0] != "resize" && t[0] != "resizebox" && t[0] != "resizeflip") continue;
    // The random geometry (reference files rg*.rgb); the fixed cases, some of them millions of
    // pixels, stay with ResizeEqualsPilBilinear: five kernels over them take minutes in a
    // sanitizer build.
    if (t.back().rfind("rg", 0) != 0) continue;
    if (!decoded.count(t[1])) decoded.emplace(t[1], decode_jpeg(jpeg_of(dir, t[1])));
    cases.push_back(t);
  }
  int flips = 0, one_pixel = 0;
  const auto run_all = [&](ResampleKernel kernel, const std::string& name) {
    for (const auto& t : cases) {
      const Image& src = decoded.at(t[1]);
      Image out;
      if (t[0] == "resizebox") {
        const BoxF box{std::stod(t[2]), std::stod(t[3]), std::stod(t[4]), std::stod(t[5])};
        out = resize_bilinear(src.view(), std::stoi(t[6]), std::stoi(t[7]), box, kernel);
      } else {
        const int l = std::stoi(t[2]), tp = std::stoi(t[3]), w = std::stoi(t[4]), h = std::stoi(t[5]);
        out = resize_bilinear(src.view().sub(l, tp, w, h), std::stoi(t[6]), std::stoi(t[7]), kernel);
        if (t[0] == "resizeflip" && t[8] == "1") {
          hflip(out);
          ++flips;
        }
        one_pixel += w == 1 || h == 1;
      }
      const auto ref = read_file(dir + "/" + t.back());
      if (!std::ranges::equal(out.pixels, ref)) {
        std::string line;
        for (const auto& tok : t) line += tok + " ";
        ADD_FAILURE() << name << ": " << line << ": " << first_diff(out.pixels, ref);
      }
    }
  };
  run_all(ResampleKernel::kReference, "reference kernels");
  const int targets =
      testing::for_each_simd_target([&](const SimdTarget& t) { run_all(ResampleKernel::kSimd, "SIMD " + t.name); });
  EXPECT_GE(cases.size(), 250u);
  EXPECT_GE(targets, 2);  // a vector target and the scalar fallback at least
  EXPECT_GT(flips, 20 * (targets + 1));
  EXPECT_GT(one_pixel, 10 * (targets + 1));
  std::printf("resize vs PIL: %zu cases x (reference + %d SIMD targets)\n", cases.size(), targets);
}

// ------------------------------------------------------------------------- partial decodes

// Regions decoded with jpeg_crop_scanline/jpeg_skip_scanlines equal the full decode.
TEST(PilReference, CropDecodeEqualsFullDecodeInsideTheRegion) {
  REQUIRE_FIXTURES();
  std::mt19937 gen(5);
  int n = 0;
  for (const auto& t : manifest(dir, "MANIFEST")) {
    // Corrupt-but-decodable variants add nothing here.
    if (t[0] != "decode" || t[1].find("_flip") != std::string::npos || t[1].find("_cut") != std::string::npos) {
      continue;
    }
    const auto data = jpeg_of(dir, t[1]);
    const Image full = decode_jpeg(data);
    for (int k = 0; k < 12; ++k) {
      std::uniform_int_distribution<int> wx(1, full.width), hy(1, full.height);
      const int w = wx(gen), h = hy(gen);
      const int x = std::uniform_int_distribution<int>(0, full.width - w)(gen);
      const int y = std::uniform_int_distribution<int>(0, full.height - h)(gen);
      JpegReader rd(data);
      const DecodedRegion d = rd.decode(8, Rect{x, y, w, h});
      ASSERT_LE(d.x, x);
      ASSERT_LE(d.y, y);
      ASSERT_GE(d.x + d.image.width, x + w);
      ASSERT_GE(d.y + d.image.height, y + h);
      int diff = 0;
      for (int r = 0; r < h; ++r) {
        const std::uint8_t* a = full.row(y + r) + 3 * x;
        const std::uint8_t* b = d.image.row(y - d.y + r) + 3 * (x - d.x);
        diff += std::memcmp(a, b, static_cast<std::size_t>(3 * w)) != 0;
      }
      EXPECT_EQ(diff, 0) << t[1] << " region " << x << "," << y << " " << w << "x" << h;
      ++n;
    }
  }
  EXPECT_GE(n, 12 * 20);
}

// A decode of a region is as strict as a full decode: on every fixture, the corrupt ones
// included (damage inside and outside the region, after the scan data, truncations), it fails iff
// the full decode fails (iff PIL fails: see the first test), and otherwise the region's pixels
// equal the full decode's. The same holds for the crop_decode fast path of the pipeline.
TEST(PilReference, CropDecodeIsAsStrictAsAFullDecode) {
  REQUIRE_FIXTURES();
  std::mt19937 gen(11);
  const PipelineSpec spec = PipelineSpec::parse(kDefaultAugmentSpec);
  int n = 0, errors = 0;
  for (const auto& t : manifest(dir, "MANIFEST")) {
    if (t[0] != "decode" && t[0] != "error") continue;
    SCOPED_TRACE(t[1]);
    const auto data = jpeg_of(dir, t[1]);
    const bool pil_fails = t[0] == "error";
    int w = 0, h = 0;
    try {
      JpegReader probe(data);
      w = probe.width();
      h = probe.height();
    } catch (const DecodeError&) {
      EXPECT_TRUE(pil_fails) << "the header of a file PIL decodes was refused";
      ++errors;
      continue;  // nothing to crop: no header
    }
    Image full;
    if (!pil_fails) full = decode_jpeg(data);
    for (int k = 0; k < 6; ++k) {
      // Regions at the top, middle and bottom, and random ones, so that damage falls before,
      // inside and after them.
      const int rw = std::uniform_int_distribution<int>(1, w)(gen);
      const int rh = std::uniform_int_distribution<int>(1, std::max(1, h / 3))(gen);
      const int rx = std::uniform_int_distribution<int>(0, w - rw)(gen);
      const int ry = k == 0 ? 0 : k == 1 ? h - rh : std::uniform_int_distribution<int>(0, h - rh)(gen);
      try {
        JpegReader rd(data);
        const DecodedRegion d = rd.decode(8, Rect{rx, ry, rw, rh});
        if (pil_fails) {
          ADD_FAILURE() << "region " << rx << "," << ry << " " << rw << "x" << rh << " decoded, PIL fails";
          continue;
        }
        int diff = 0;
        for (int r = 0; r < rh; ++r) {
          diff += std::memcmp(full.row(ry + r) + 3 * rx, d.image.row(ry - d.y + r) + 3 * (rx - d.x),
                              static_cast<std::size_t>(3 * rw)) != 0;
        }
        EXPECT_EQ(diff, 0) << "region " << rx << "," << ry << " " << rw << "x" << rh;
      } catch (const DecodeError& e) {
        EXPECT_TRUE(pil_fails) << "region " << rx << "," << ry << " " << rw << "x" << rh << ": " << e.what();
      }
      ++n;
    }
    for (std::uint64_t v = 0; v < 4; ++v) {
      AugmentOptions crop;
      crop.fast.crop_decode = true;
      Rng r1 = Rng::for_variant(1, t[1], v), r2 = Rng::for_variant(1, t[1], v);
      try {
        const Image fast = augment_jpeg(data, spec, r1, crop);
        EXPECT_FALSE(pil_fails) << "crop_decode augmented a file PIL fails on";
        if (!pil_fails) {
          EXPECT_EQ(fast.pixels, augment_jpeg(data, spec, r2).pixels) << "variant " << v;
        }
      } catch (const DecodeError& e) {
        EXPECT_TRUE(pil_fails) << "variant " << v << ": " << e.what();
      }
    }
    errors += pil_fails;
  }
  EXPECT_GE(n, 6 * 60);
  EXPECT_GE(errors, 30);  // the corrupt fixtures really were there
}

// ------------------------------------------------------------------------------ torchvision

TEST(TorchvisionReference, CropBoxesEqualTorchvisionForTheSameDraws) {
  REQUIRE_FIXTURES();
  int n = 0, fallbacks = 0;
  for (const auto& t : manifest(dir, "MANIFEST_TV")) {
    if (t[0] != "tvbox") continue;
    const int w = std::stoi(t[1]), h = std::stoi(t[2]);
    const CropBox want{std::stoi(t[3]), std::stoi(t[4]), std::stoi(t[5]), std::stoi(t[6])};
    ScriptedSource src(parse_draws({t.begin() + 7, t.end()}));
    const CropBox got = sample_rrc_box(w, h, RrcParams{}, src);
    EXPECT_EQ(got, want) << w << "x" << h << " case " << n << ": got (" << got.top << "," << got.left << ","
                         << got.height << "," << got.width << ")";
    EXPECT_TRUE(src.all_consumed()) << "draw count differs from torchvision's";
    EXPECT_EQ(src.error(), "");
    fallbacks += (t.size() == 7 + 20);  // 10 attempts x 2 uniform draws, no randint
    ++n;
  }
  EXPECT_GE(n, 2000);
  EXPECT_GT(fallbacks, 100);  // the 10x1000 and 1x1-like shapes must exercise the fallback
  std::printf("rrc boxes vs torchvision: %d cases (%d central-crop fallbacks)\n", n, fallbacks);
}

TEST(TorchvisionReference, DefaultPipelineEqualsTorchvisionOnPil) {
  REQUIRE_FIXTURES();
  const PipelineSpec spec = PipelineSpec::parse(kDefaultAugmentSpec);
  int n = 0;
  for (const auto& t : manifest(dir, "MANIFEST_TV")) {
    if (t[0] != "tvaug") continue;
    const auto data = jpeg_of(dir, t[1]);
    const auto ref = read_file(dir + "/" + t[2]);
    const auto draws = parse_draws({t.begin() + 3, t.end()});
    {
      ScriptedSource src(draws);
      const Image out = augment_jpeg(data, spec, src);
      EXPECT_TRUE(std::ranges::equal(out.pixels, ref)) << t[1] << " " << t[2] << ": " << first_diff(out.pixels, ref);
      EXPECT_TRUE(src.all_consumed());
      EXPECT_EQ(src.error(), "");
    }
    {
      // crop_decode is exact as well.
      ScriptedSource src(draws);
      AugmentOptions o;
      o.fast.crop_decode = true;
      const Image out = augment_jpeg(data, spec, src, o);
      EXPECT_TRUE(std::ranges::equal(out.pixels, ref)) << "crop_decode " << t[1] << " " << t[2] << ": " << first_diff(out.pixels, ref);
    }
    ++n;
  }
  EXPECT_GE(n, 100);
  std::printf("default augment vs torchvision: %d outputs byte-identical\n", n);
}

TEST(TorchvisionReference, DeterministicOpsEqualTorchvision) {
  REQUIRE_FIXTURES();
  int n = 0;
  for (const auto& t : manifest(dir, "MANIFEST_TV")) {
    if (t[0] != "tvspec") continue;
    const auto data = jpeg_of(dir, t[1]);
    const auto ref = read_file(dir + "/" + t[3]);
    const PipelineSpec spec = PipelineSpec::parse(t[2]);
    for (const bool crop : {false, true}) {
      Rng rng(0);  // unused: these ops draw nothing
      AugmentOptions o;
      o.fast.crop_decode = crop;
      const Image out = augment_jpeg(data, spec, rng, o);
      EXPECT_TRUE(std::ranges::equal(out.pixels, ref)) << t[1] << " " << t[2] << (crop ? " crop_decode" : "") << ": "
                                     << first_diff(out.pixels, ref);
    }
    ++n;
  }
  EXPECT_GE(n, 30);
  std::printf("resize/center_crop vs torchvision: %d outputs byte-identical\n", n);
}

}  // namespace
}  // namespace prepfs::transform
