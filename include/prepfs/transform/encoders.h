// Output encoders for decoded/ and augmented/ files, and their exact sizes.
//
// PPM: binary P6 exactly as PIL writes it ("P6\n<w> <h>\n255\n" + RGB rows), so PIL (and hence
// torchvision's ImageFolder) reads it back to the same pixels.
// NPY: format 1.0 exactly as numpy.save (numpy 1.24) writes an (H, W, 3) uint8 C-order array:
// magic "\x93NUMPY" 01 00, little-endian u16 header length, then the dict
// "{'descr': '|u1', 'fortran_order': False, 'shape': (H, W, 3), }" followed by
// 21 - len(str(H)) spaces (numpy's room for growing axis 0), padded with spaces and a final '\n'
// so that the data starts at a multiple of 64 bytes.
//
// encoded_size() needs only (format, width, height): stat() uses it before anything is decoded.
#pragma once

#include "prepfs/transform/image.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace prepfs::transform {

enum class OutputFormat { kPpm, kNpy };

// "ppm" / "npy" (the decoded_format= option values and file extensions).
std::optional<OutputFormat> parse_output_format(std::string_view name) noexcept;
const char* extension(OutputFormat f) noexcept;  // "ppm" or "npy", no dot

std::string encoded_header(OutputFormat f, int width, int height);
std::uint64_t encoded_size(OutputFormat f, int width, int height);

// Writes header + pixels into out, which must hold encoded_size() bytes; returns bytes written.
std::size_t encode_into(OutputFormat f, ImageView img, std::span<std::uint8_t> out);
std::vector<std::uint8_t> encode(OutputFormat f, ImageView img);

}  // namespace prepfs::transform
