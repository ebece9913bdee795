// prepfs-xfbench: CPU cost per item of the transform layer's paths, one thread, files in memory.
//
//   prepfs-xfbench [--spec SPEC] [--seconds T] [--rounds R] [--only CASE,...] [--items N]
//                  [--dump-decoded DIR] [--dump-boxes FILE] PATH...
//
// PATHs are JPEG files or directories (searched recursively; files are recognised by content).
// Variant k of file i draws from Rng::for_variant(1, path, k). Cases:
//   decode                 exact decode (PIL-equal)
//   decode+ppm             render_decoded(): exact decode straight into a PPM (decoded/ view)
//   decode 8x8             an 8x8 region at the top left: the floor of any decode that fails
//                          when a full decode fails (the whole file is still entropy-decoded)
//   resize ref             the spec's first op (rrc: crop + PIL bilinear resize) alone, on decoded
//                          pixels, with the pre-SIMD reference kernels
//   resize                 the same with the SIMD kernels (best target)
//   resize TARGET          the same pinned to each target this CPU has (AVX3, AVX2, SSE4, SCALAR)
//   decoded->variant ref   a fresh variant from cached decoded pixels as the daemon made it before:
//                          copy the image, apply_ops with the reference kernels
//   decoded->variant       as the daemon makes it now: apply_ops on the cache entry in place
//   jpeg ref               augment_jpeg, no fast paths, reference kernels (the old exact path)
//   jpeg exact             augment_jpeg, no fast paths
//   jpeg crop              + crop_decode (exact)
//   jpeg dct               + DCT scaling (dct_min_ratio 2; not exact)
//   jpeg crop+dct          both: the daemon's defaults (crop_decode=1 fast_paths=1)
//   jpeg crop+dct ref      both, reference kernels
//   jpeg verified          the daemon's defaults for a file already decoded to its end once
//                          (store/verified_files.h): the decode stops at the crop's bottom
// The DCT cases also print the mean absolute difference to the exact path (levels of 255).
//
// Timing: R rounds (default 3); in each, every case runs for T/R CPU-seconds of this thread, so
// the cases are interleaved and a load change on a shared machine hits them alike. Printed: the
// CPU ms per item of each round, and items/s per core from the median round.
//
// --items N: runs each selected case over exactly N items once, inside run_items(), and prints
// nothing else but counts. Under valgrind --tool=callgrind --toggle-collect='*run_items*' the
// instruction count / N is the cost per item, exactly repeatable on a noisy machine. (Valgrind
// hides AVX-512 from the program, so "resize" runs AVX2 there.)
//
// --dump-decoded writes each decoded image as DIR/<n>.ppm plus DIR/list.txt (source path per
// line) so pil_bench.py --verify can compare them with PIL.
// --dump-boxes writes the rrc crop boxes of the "resize" cases, in the order they run them
// (variants 0-3 of every file), as "PATH LEFT TOP WIDTH HEIGHT" lines for pil_bench.py --boxes.
#include "prepfs/transform/augment.h"
#include "prepfs/transform/crop_sampler.h"
#include "prepfs/transform/encoders.h"
#include "prepfs/transform/error.h"
#include "prepfs/transform/jpeg_decode.h"
#include "prepfs/transform/jpeg_header.h"
#include "prepfs/transform/pipeline_spec.h"
#include "prepfs/transform/render.h"
#include "prepfs/transform/resample.h"
#include "prepfs/transform/simd_targets.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace prepfs::transform;

namespace {

struct Sample {
  std::string path;
  std::vector<std::uint8_t> bytes;
  Image decoded;  // filled when a case needs decoded pixels; empty if the file does not decode
};

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void load(const fs::path& p, std::vector<Sample>& out) {
  if (fs::is_directory(p)) {
    std::vector<fs::path> entries;
    for (const auto& e : fs::recursive_directory_iterator(p)) {
      if (e.is_regular_file()) entries.push_back(e.path());
    }
    std::sort(entries.begin(), entries.end());
    for (const auto& e : entries) load(e, out);
    return;
  }
  std::ifstream f(p, std::ios::binary);
  std::vector<std::uint8_t> b((std::istreambuf_iterator<char>(f)), {});
  if (looks_like_jpeg(b)) out.push_back({p.string(), std::move(b), {}});
}

// One thing to measure: work(file, variant) returns a byte count (kept, so nothing is optimised
// away). pin: the SIMD target to run on (0: the best).
struct Case {
  using Work = std::function<std::size_t(const Sample&, std::uint64_t)>;
  Case(std::string n, Work w, bool decoded = false, std::int64_t target = 0)
      : name(std::move(n)), work(std::move(w)), pin(target), needs_decoded(decoded) {}

  std::string name;
  Work work;
  std::int64_t pin = 0;
  bool needs_decoded = false;
  // Results.
  std::vector<double> ms_per_item;  // per round
  long items = 0, errors = 0;
  std::size_t next = 0;  // where the next round goes on: file index, then variant
  std::uint64_t variant = 0;
};

// Runs c on items until `seconds` of thread CPU time passed (or exactly `count` items when
// count > 0); returns {items, seconds}.
[[gnu::noinline]] std::pair<long, double> run_items(Case& c, const std::vector<Sample>& files, double seconds,
                                                    long count, std::size_t& sink) {
  pin_simd_target(c.pin);
  const double t0 = thread_cpu_seconds();
  double t = t0;
  long n = 0;
  while (count > 0 ? n < count : t - t0 < seconds) {
    for (int batch = 0; batch < 8; ++batch, ++n) {  // read the clock every 8 items
      if (count > 0 && n >= count) break;
      const Sample& s = files[c.next];
      try {
        sink += c.work(s, c.variant);
      } catch (const DecodeError&) {
        ++c.errors;
      }
      if (++c.next == files.size()) {
        c.next = 0;
        ++c.variant;
      }
    }
    t = thread_cpu_seconds();
  }
  pin_simd_target(0);
  return {n, t - t0};
}

std::vector<Case> make_cases(const PipelineSpec& spec) {
  std::vector<Case> cs;
  const auto ops = std::span<const Op>(spec.ops());
  cs.push_back({"decode", [](const Sample& s, std::uint64_t) { return decode_jpeg(s.bytes).pixels.size(); }});
  cs.push_back({"decode+ppm",
                [](const Sample& s, std::uint64_t) { return render_decoded(s.bytes, OutputFormat::kPpm).size(); }});
  cs.push_back({"decode 8x8", [](const Sample& s, std::uint64_t) -> std::size_t {
                  JpegReader rd(s.bytes);
                  return rd.decode(8, Rect{0, 0, 8, 8}).image.pixels.size();
                }});
  // The first op alone, from decoded pixels.
  const auto first_op = [ops](ResampleKernel k) {
    return [ops, k](const Sample& s, std::uint64_t v) -> std::size_t {
      if (s.decoded.pixels.empty()) throw DecodeError(DecodeError::Kind::kCorrupt, "did not decode");
      Rng rng = Rng::for_variant(1, s.path, v);
      return apply_ops(s.decoded.view(), ops.first(1), rng, k).pixels.size();
    };
  };
  cs.emplace_back("resize ref", first_op(ResampleKernel::kReference), true);
  cs.emplace_back("resize", first_op(ResampleKernel::kSimd), true);
  for (const SimdTarget& t : simd_targets())
    cs.emplace_back("resize " + t.name, first_op(ResampleKernel::kSimd), true, t.id);
  cs.emplace_back(
      "decoded->variant ref",
      [ops](const Sample& s, std::uint64_t v) -> std::size_t {
        if (s.decoded.pixels.empty()) throw DecodeError(DecodeError::Kind::kCorrupt, "did not decode");
        Rng rng = Rng::for_variant(1, s.path, v);
        return apply_ops(copy_image(s.decoded.view()), ops, rng, ResampleKernel::kReference).pixels.size();
      },
      true);
  cs.emplace_back(
      "decoded->variant",
      [ops](const Sample& s, std::uint64_t v) -> std::size_t {
        if (s.decoded.pixels.empty()) throw DecodeError(DecodeError::Kind::kCorrupt, "did not decode");
        Rng rng = Rng::for_variant(1, s.path, v);
        return apply_ops(s.decoded.view(), ops, rng).pixels.size();
      },
      true);
  const auto jpeg = [&spec](FastPaths fast, ResampleKernel k) {
    return [&spec, fast, k](const Sample& s, std::uint64_t v) -> std::size_t {
      AugmentOptions o;
      o.fast = fast;
      o.resample = k;
      Rng rng = Rng::for_variant(1, s.path, v);
      return augment_jpeg(s.bytes, spec, rng, o).pixels.size();
    };
  };
  cs.emplace_back("jpeg ref", jpeg(FastPaths{}, ResampleKernel::kReference));
  cs.emplace_back("jpeg exact", jpeg(FastPaths{}, ResampleKernel::kSimd));
  cs.emplace_back("jpeg crop", jpeg(FastPaths{true, false, 2.0}, ResampleKernel::kSimd));
  cs.emplace_back("jpeg dct", jpeg(FastPaths{false, true, 2.0}, ResampleKernel::kSimd));
  cs.emplace_back("jpeg crop+dct", jpeg(FastPaths{true, true, 2.0}, ResampleKernel::kSimd));
  cs.emplace_back("jpeg crop+dct ref", jpeg(FastPaths{true, true, 2.0}, ResampleKernel::kReference));
  cs.emplace_back("jpeg verified", jpeg(FastPaths{true, true, 2.0, true}, ResampleKernel::kSimd));
  return cs;
}

// Mean absolute difference of variant 0 of every file to the exact path.
double mad_vs_exact(const std::vector<Sample>& files, const PipelineSpec& spec, const FastPaths& fast) {
  double sum = 0;
  long n = 0;
  AugmentOptions o;
  o.fast = fast;
  for (const auto& s : files) {
    try {
      Rng r1 = Rng::for_variant(1, s.path, 0), r2 = Rng::for_variant(1, s.path, 0);
      const Image a = augment_jpeg(s.bytes, spec, r1);
      const Image b = augment_jpeg(s.bytes, spec, r2, o);
      double d = 0;
      for (std::size_t p = 0; p < a.pixels.size(); ++p) d += std::abs(int(a.pixels[p]) - int(b.pixels[p]));
      sum += d / static_cast<double>(a.pixels.size());
      ++n;
    } catch (const DecodeError&) {
    }
  }
  return n ? sum / static_cast<double>(n) : 0;
}

void dump_decoded(const std::vector<Sample>& files, const std::string& dump) {
  fs::create_directories(dump);
  std::ofstream list(fs::path(dump) / "list.txt");
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::vector<std::uint8_t> ppm;
    try {
      ppm = encode(OutputFormat::kPpm, decode_jpeg(files[i].bytes).view());
    } catch (const DecodeError& e) {
      std::fprintf(stderr, "%s: %s\n", files[i].path.c_str(), e.what());
    }
    std::ofstream(fs::path(dump) / (std::to_string(i) + ".ppm"), std::ios::binary)
        .write(reinterpret_cast<const char*>(ppm.data()), static_cast<std::streamsize>(ppm.size()));
    list << files[i].path << "\n";
  }
  std::printf("dumped %zu decoded images to %s\n", files.size(), dump.c_str());
}

int dump_boxes(const std::vector<Sample>& files, const PipelineSpec& spec, const std::string& out) {
  const auto* rrc = spec.ops().empty() ? nullptr : std::get_if<RrcOp>(&spec.ops().front());
  if (!rrc) {
    std::fprintf(stderr, "--dump-boxes: the spec does not start with rrc\n");
    return 2;
  }
  std::ofstream f(out);
  for (std::uint64_t k = 0; k < 4; ++k) {
    for (const Sample& s : files) {
      if (s.decoded.pixels.empty()) continue;
      Rng rng = Rng::for_variant(1, s.path, k);
      const CropBox b = sample_rrc_box(s.decoded.width, s.decoded.height, rrc->params, rng);
      f << s.path << " " << b.left << " " << b.top << " " << b.width << " " << b.height << "\n";
    }
  }
  std::printf("wrote the crop boxes of 4 variants of %zu files to %s\n", files.size(), out.c_str());
  return 0;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
  return out;
}

int usage() {
  std::fprintf(stderr,
               "usage: prepfs-xfbench [--spec SPEC] [--seconds T] [--rounds R] [--only CASE,...] [--items N] "
               "[--dump-decoded DIR] [--dump-boxes FILE] PATH...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec_text(kDefaultAugmentSpec);
  double seconds = 3;
  int rounds = 3;
  long items = 0;
  std::string dump, dump_boxes_to, only;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--spec" && has_value) {
      spec_text = argv[++i];
    } else if (a == "--seconds" && has_value) {
      seconds = std::stod(argv[++i]);
    } else if (a == "--rounds" && has_value) {
      rounds = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--items" && has_value) {
      items = std::stol(argv[++i]);
    } else if (a == "--only" && has_value) {
      only = argv[++i];
    } else if (a == "--dump-decoded" && has_value) {
      dump = argv[++i];
    } else if (a == "--dump-boxes" && has_value) {
      dump_boxes_to = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      return usage();
    } else {
      paths.push_back(a);
    }
  }
  if (paths.empty()) return usage();
  std::vector<Sample> files;
  for (const auto& p : paths) load(p, files);
  if (files.empty()) {
    std::fprintf(stderr, "no JPEG files found\n");
    return 1;
  }
  PipelineSpec spec;
  try {
    spec = PipelineSpec::parse(spec_text);
  } catch (const SpecError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (!dump.empty()) dump_decoded(files, dump);

  std::vector<Case> cases = make_cases(spec);
  if (!only.empty()) {
    const std::vector<std::string> wanted = split(only, ',');
    std::erase_if(cases,
                  [&](const Case& c) { return std::find(wanted.begin(), wanted.end(), c.name) == wanted.end(); });
    if (cases.empty()) {
      std::fprintf(stderr, "--only matches no case\n");
      return 2;
    }
  }
  if (!dump_boxes_to.empty() ||
      std::any_of(cases.begin(), cases.end(), [](const Case& c) { return c.needs_decoded; })) {
    for (auto& s : files) {
      try {
        s.decoded = decode_jpeg(s.bytes);
      } catch (const DecodeError&) {
      }
    }
  }
  if (!dump_boxes_to.empty()) return dump_boxes(files, spec, dump_boxes_to);
  std::uint64_t bytes = 0;
  for (const auto& f : files) bytes += f.bytes.size();
  std::size_t sink = 0;

  if (items > 0) {  // for callgrind: fixed work, no timing
    for (Case& c : cases) {
      run_items(c, files, 0, items, sink);
      std::printf("%s: %ld items, %ld errors\n", c.name.c_str(), items, c.errors);
    }
    return sink == 0 ? 1 : 0;
  }

  std::printf(
      "files: %zu JPEGs, %.1f MB, mean %.0f KB; spec: %s; %d rounds of %.2f CPU-s per case, 1 thread; "
      "SIMD dispatch: %s\n",
      files.size(), static_cast<double>(bytes) / 1e6, static_cast<double>(bytes) / 1e3 / files.size(),
      spec.canonical().c_str(), rounds, seconds / rounds, active_simd_target().name.c_str());
  for (int r = 0; r < rounds; ++r) {
    for (Case& c : cases) {
      const auto [n, t] = run_items(c, files, seconds / rounds, 0, sink);
      c.items += n;
      c.ms_per_item.push_back(t * 1e3 / static_cast<double>(n));
    }
  }
  std::printf("%-22s %-26s %9s %12s %8s %7s %s\n", "case", "ms/item per round", "median", "items/s/core", "items",
              "errors", "MAD vs exact");
  for (Case& c : cases) {
    std::string per_round;
    for (double ms : c.ms_per_item) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%.3f ", ms);
      per_round += buf;
    }
    std::vector<double> sorted = c.ms_per_item;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    std::printf("%-22s %-26s %9.3f %12.1f %8ld %7ld", c.name.c_str(), per_round.c_str(), median, 1e3 / median, c.items,
                c.errors);
    if (c.name == "jpeg dct") std::printf(" %.3f", mad_vs_exact(files, spec, FastPaths{false, true, 2.0}));
    if (c.name == "jpeg crop+dct") std::printf(" %.3f", mad_vs_exact(files, spec, FastPaths{true, true, 2.0}));
    std::printf("\n");
  }
  return sink == 0 ? 1 : 0;
}
