#include "prepfs/transform/render.h"

#include "prepfs/transform/jpeg_decode.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace prepfs::transform {

std::uint64_t decoded_file_size(const JpegInfo& info, OutputFormat f) {
  return encoded_size(f, static_cast<int>(info.width), static_cast<int>(info.height));
}

std::uint64_t augmented_file_size(const JpegInfo& info, const PipelineSpec& spec, OutputFormat f) {
  const Size s = spec.output_size(static_cast<int>(info.width), static_cast<int>(info.height));
  return encoded_size(f, s.width, s.height);
}

std::size_t render_decoded(std::span<const std::uint8_t> jpeg, OutputFormat f, std::span<std::uint8_t> out,
                           const DecodeLimits& limits) {
  JpegReader rd(jpeg, limits);
  const std::string head = encoded_header(f, rd.width(), rd.height());
  const std::size_t pixels = std::size_t(rd.width()) * std::size_t(rd.height()) * kChannels;
  if (out.size() < head.size() + pixels) throw std::length_error("render_decoded: buffer too small");
  std::memcpy(out.data(), head.data(), head.size());
  rd.decode_into(out.subspan(head.size(), pixels));  // no intermediate image, no copy
  return head.size() + pixels;
}

std::vector<std::uint8_t> render_decoded(std::span<const std::uint8_t> jpeg, OutputFormat f,
                                         const DecodeLimits& limits) {
  const JpegInfo info = read_jpeg_info(jpeg, limits.max_pixels);
  std::vector<std::uint8_t> out(decoded_file_size(info, f));
  render_decoded(jpeg, f, out, limits);
  return out;
}

std::vector<std::uint8_t> render_augmented(std::span<const std::uint8_t> jpeg, const PipelineSpec& spec,
                                           RandomSource& rs, OutputFormat f, const AugmentOptions& opts) {
  const Image img = augment_jpeg(jpeg, spec, rs, opts);
  return encode(f, img.view());
}

}  // namespace prepfs::transform
