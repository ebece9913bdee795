// Human sizes for options: "512M", "4G", "1.5T", "4096", "0". Binary units (K = 1024).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace prepfs {

// Throws prepfs::Error(EINVAL) with a message naming the text on anything unparsable.
uint64_t parse_size(std::string_view text);
std::string format_size(uint64_t bytes);

}  // namespace prepfs
