#include "prepfs/transform/encoders.h"

#include <cstring>
#include <stdexcept>

namespace prepfs::transform {
namespace {

constexpr std::size_t kNpyAlign = 64;         // numpy ARRAY_ALIGN
constexpr std::size_t kNpyGrowthDigits = 21;  // numpy GROWTH_AXIS_MAX_DIGITS

std::string ppm_header(int w, int h) { return "P6\n" + std::to_string(w) + " " + std::to_string(h) + "\n255\n"; }

std::string npy_header(int w, int h) {
  const std::string hs = std::to_string(h);
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + hs + ", " + std::to_string(w) + ", 3), }";
  dict.append(kNpyGrowthDigits - std::min(kNpyGrowthDigits, hs.size()), ' ');
  // magic (6) + version (2) + u16 length (2) + dict + padding + '\n' == multiple of 64;
  // numpy always adds 1..64 spaces (never 0), hence the "64 -" form.
  const std::size_t hlen = dict.size() + 1;
  const std::size_t pad = kNpyAlign - ((10 + hlen) % kNpyAlign);
  dict.append(pad, ' ');
  dict.push_back('\n');
  const std::size_t len = dict.size();
  if (len > 0xFFFF) throw std::length_error("npy header too long");
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(len & 0xFF));
  out.push_back(static_cast<char>(len >> 8));
  out += dict;
  return out;
}

}  // namespace

std::optional<OutputFormat> parse_output_format(std::string_view name) noexcept {
  if (name == "ppm") return OutputFormat::kPpm;
  if (name == "npy") return OutputFormat::kNpy;
  return std::nullopt;
}

const char* extension(OutputFormat f) noexcept { return f == OutputFormat::kPpm ? "ppm" : "npy"; }

std::string encoded_header(OutputFormat f, int width, int height) {
  return f == OutputFormat::kPpm ? ppm_header(width, height) : npy_header(width, height);
}

std::uint64_t encoded_size(OutputFormat f, int width, int height) {
  return encoded_header(f, width, height).size() + std::uint64_t(width) * std::uint64_t(height) * kChannels;
}

std::size_t encode_into(OutputFormat f, ImageView img, std::span<std::uint8_t> out) {
  const std::string head = encoded_header(f, img.width, img.height);
  const std::size_t row = static_cast<std::size_t>(img.width) * kChannels;
  const std::size_t total = head.size() + row * static_cast<std::size_t>(img.height);
  if (out.size() < total) throw std::length_error("encode_into: buffer too small");
  std::memcpy(out.data(), head.data(), head.size());
  std::uint8_t* p = out.data() + head.size();
  for (int y = 0; y < img.height; ++y, p += row) {
    if (row != 0) std::memcpy(p, img.row(y), row);
  }
  return total;
}

std::vector<std::uint8_t> encode(OutputFormat f, ImageView img) {
  std::vector<std::uint8_t> out(encoded_size(f, img.width, img.height));
  encode_into(f, img, out);
  return out;
}

}  // namespace prepfs::transform
