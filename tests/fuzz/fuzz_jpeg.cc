// libFuzzer target: the JPEG header walk, then the decoded/ and augmented/ renders of the same
// bytes, as the daemon runs them on a file it serves. The input is a whole file.
//
// What counts as a finding: any crash, sanitizer report, leak, hang or allocation past the
// limits. A DecodeError is the correct answer to a bad file; any other exception escapes and is
// reported as a crash too (the daemon would turn it into an unexplained EIO).
#include <cstddef>
#include <cstdint>
#include <span>

#include "prepfs/transform/augment.h"
#include "prepfs/transform/error.h"
#include "prepfs/transform/jpeg_header.h"
#include "prepfs/transform/pipeline_spec.h"
#include "prepfs/transform/render.h"
#include "prepfs/transform/rng.h"

namespace xf = prepfs::transform;

namespace {

// Small, so that each run decodes in milliseconds; the limit logic is the same at any size.
constexpr std::uint64_t kMaxPixels = 4'000'000;

const xf::PipelineSpec& default_spec() {
  static const xf::PipelineSpec spec = xf::PipelineSpec::parse(xf::kDefaultAugmentSpec);
  return spec;
}

// The header walk on every prefix length a probe could read must agree with the whole-file walk.
void walk_prefixes(std::span<const std::uint8_t> data) {
  const xf::HeaderResult whole = xf::parse_jpeg_header(data, /*complete=*/true);
  for (std::size_t n : {std::size_t{0}, std::size_t{3}, data.size() / 2, data.size()}) {
    if (n > data.size()) continue;
    const xf::HeaderResult part = xf::parse_jpeg_header(data.first(n), /*complete=*/false);
    if (part.status == xf::HeaderResult::Status::kNeedMore && part.need_bytes <= n) __builtin_trap();
    if (part.status == xf::HeaderResult::Status::kOk &&
        (whole.status != part.status || whole.info.width != part.info.width || whole.info.height != part.info.height))
      __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  const std::span<const std::uint8_t> data(bytes, size);
  walk_prefixes(data);
  xf::DecodeLimits limits;
  limits.max_pixels = kMaxPixels;
  bool decoded_ok = false;
  try {
    const xf::JpegInfo info = xf::read_jpeg_info(data, limits.max_pixels);
    const auto decoded = xf::render_decoded(data, xf::OutputFormat::kPpm, limits);
    if (decoded.size() != xf::decoded_file_size(info, xf::OutputFormat::kPpm)) __builtin_trap();
    decoded_ok = true;
  } catch (const xf::DecodeError&) {
  }
  // Every input runs the exact path, whose answer must be decoded/'s (it decodes the whole file as
  // decoded/ does: a file is good or bad in both), and then the fast paths its last byte picks, so
  // the fuzzer reaches every combination. The seeds end with EOI (0xD9: crop_decode alone), so
  // with the exact path picked by the last byte alone, no seed ever ran it.
  auto augment = [&](bool crop_decode, bool dct_scale) {
    xf::AugmentOptions opts;
    opts.limits = limits;
    opts.fast.crop_decode = crop_decode;
    opts.fast.dct_scale = dct_scale;
    xf::Rng rng(size);
    try {
      const xf::Image img = xf::augment_jpeg(data, default_spec(), rng, opts);
      if (img.width != 224 || img.height != 224) __builtin_trap();
      return true;
    } catch (const xf::DecodeError&) {
      return false;
    }
  };
  if (augment(false, false) != decoded_ok) __builtin_trap();
  const bool crop_decode = size > 0 && (bytes[size - 1] & 1), dct_scale = size > 0 && (bytes[size - 1] & 2);
  if (crop_decode || dct_scale) augment(crop_decode, dct_scale);
  return 0;
}
