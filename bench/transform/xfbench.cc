// prepfs-xfbench: decode + augment samples/s per core, exact path vs fast paths.
//
//   prepfs-xfbench [--spec SPEC] [--seconds T] [--dump-decoded DIR] PATH...
//
// PATHs are JPEG files or directories (searched recursively; files are recognised by content).
// All files are loaded into memory first, so this measures CPU work only. Each mode runs on one
// thread for about T seconds over the files in order, variant k of file i drawing from
// Rng::for_variant(1, path, k), and reports samples per CPU-second of that thread (= per core).
// Modes:
//   decode            exact decode only
//   decode+ppm        render_decoded(): exact decode straight into a PPM buffer (decoded/ view)
//   augment exact     full decode, crop, PIL-bilinear resize, flip (augmented/, exact)
//   augment crop      + crop_decode fast path (still exact)
//   augment dct       + DCT-scaling fast path (dct_min_ratio 2)
//   augment crop+dct  both fast paths
// For the fast modes it also prints the mean absolute pixel difference to the exact outputs of
// the same variants (the statistical-equivalence measure of augment.h).
// --dump-decoded writes each decoded image as DIR/<n>.ppm plus DIR/list.txt (source path per
// line) so pil_bench.py --verify can compare them with PIL.
#include "prepfs/transform/augment.h"
#include "prepfs/transform/encoders.h"
#include "prepfs/transform/error.h"
#include "prepfs/transform/jpeg_decode.h"
#include "prepfs/transform/jpeg_header.h"
#include "prepfs/transform/pipeline_spec.h"
#include "prepfs/transform/render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace prepfs::transform;

namespace {

struct Sample {
  std::string path;
  std::vector<std::uint8_t> bytes;
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
  if (looks_like_jpeg(b)) out.push_back({p.string(), std::move(b)});
}

struct Result {
  double per_core = 0;
  long samples = 0;
  long errors = 0;
};

template <class F>
Result measure(const std::vector<Sample>& files, double seconds, F&& work) {
  Result r;
  const double t0 = thread_cpu_seconds();
  double t = t0;
  for (std::uint64_t k = 0; t - t0 < seconds; ++k) {
    for (std::size_t i = 0; i < files.size(); ++i) {
      try {
        work(files[i], k);
      } catch (const DecodeError&) {
        ++r.errors;
      }
      ++r.samples;
    }
    t = thread_cpu_seconds();
  }
  r.per_core = static_cast<double>(r.samples) / (t - t0);
  return r;
}

int usage() {
  std::fprintf(stderr, "usage: prepfs-xfbench [--spec SPEC] [--seconds T] [--dump-decoded DIR] PATH...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec_text(kDefaultAugmentSpec);
  double seconds = 5;
  std::string dump;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--spec" && i + 1 < argc) {
      spec_text = argv[++i];
    } else if (a == "--seconds" && i + 1 < argc) {
      seconds = std::stod(argv[++i]);
    } else if (a == "--dump-decoded" && i + 1 < argc) {
      dump = argv[++i];
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
  std::uint64_t bytes = 0;
  for (const auto& f : files) bytes += f.bytes.size();
  std::printf("files: %zu JPEGs, %.1f MB, mean %.0f KB; spec: %s; %.1f s per mode, 1 thread\n", files.size(),
              bytes / 1e6, bytes / 1e3 / static_cast<double>(files.size()), spec.canonical().c_str(), seconds);

  if (!dump.empty()) {
    fs::create_directories(dump);
    std::ofstream list(fs::path(dump) / "list.txt");
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::vector<std::uint8_t> ppm;
      try {
        const Image img = decode_jpeg(files[i].bytes);
        ppm = encode(OutputFormat::kPpm, img.view());
      } catch (const DecodeError& e) {
        std::fprintf(stderr, "%s: %s\n", files[i].path.c_str(), e.what());
      }
      std::ofstream(fs::path(dump) / (std::to_string(i) + ".ppm"), std::ios::binary)
          .write(reinterpret_cast<const char*>(ppm.data()), static_cast<std::streamsize>(ppm.size()));
      list << files[i].path << "\n";
    }
    std::printf("dumped %zu decoded images to %s\n", files.size(), dump.c_str());
  }

  volatile std::size_t sink = 0;  // keeps the work observable
  std::printf("%-22s %12s %10s %8s %s\n", "mode", "samples/s", "samples", "errors", "MAD vs exact");
  const Result d0 = measure(files, seconds,
                            [&](const Sample& s, std::uint64_t) { sink = sink + decode_jpeg(s.bytes).pixels.size(); });
  std::printf("%-22s %12.1f %10ld %8ld\n", "decode", d0.per_core, d0.samples, d0.errors);
  const Result dec = measure(files, seconds, [&](const Sample& s, std::uint64_t) {
    sink = sink + render_decoded(s.bytes, OutputFormat::kPpm).size();
  });
  std::printf("%-22s %12.1f %10ld %8ld\n", "decode+ppm", dec.per_core, dec.samples, dec.errors);

  struct Mode {
    const char* name;
    FastPaths fast;
  };
  const Mode modes[] = {{"augment exact", FastPaths{}},
                        {"augment crop", FastPaths{true, false, 2.0}},
                        {"augment dct", FastPaths{false, true, 2.0}},
                        {"augment crop+dct", FastPaths{true, true, 2.0}},
                        {"augment crop+dct r=1", FastPaths{true, true, 1.0}}};
  for (const Mode& m : modes) {
    AugmentOptions o;
    o.fast = m.fast;
    const Result r = measure(files, seconds, [&](const Sample& s, std::uint64_t k) {
      Rng rng = Rng::for_variant(1, s.path, k);
      sink = sink + augment_jpeg(s.bytes, spec, rng, o).pixels.size();
    });
    // Pixel difference to the exact path on variant 0 of every file.
    double mad_sum = 0;
    long n = 0;
    if (m.fast.crop_decode || m.fast.dct_scale) {
      for (const auto& s : files) {
        try {
          Rng r1 = Rng::for_variant(1, s.path, 0), r2 = Rng::for_variant(1, s.path, 0);
          const Image a = augment_jpeg(s.bytes, spec, r1);
          const Image b = augment_jpeg(s.bytes, spec, r2, o);
          double d = 0;
          for (std::size_t p = 0; p < a.pixels.size(); ++p) {
            d += std::abs(int(a.pixels[p]) - int(b.pixels[p]));
          }
          mad_sum += d / static_cast<double>(a.pixels.size());
          ++n;
        } catch (const DecodeError&) {
        }
      }
    }
    if (n > 0) {
      std::printf("%-22s %12.1f %10ld %8ld %.3f\n", m.name, r.per_core, r.samples, r.errors,
                  mad_sum / static_cast<double>(n));
    } else {
      std::printf("%-22s %12.1f %10ld %8ld\n", m.name, r.per_core, r.samples, r.errors);
    }
  }
  return sink == 0 ? 1 : 0;
}
