#include "prepfs/common/size.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <string>

#include "prepfs/common/error.h"

namespace prepfs {

uint64_t parse_size(std::string_view text) {
  auto bad = [&](const char* why) {
    return Error(
        EINVAL, "invalid size '" + std::string(text) + "': " + why + " (expected e.g. 512M, 4G, 1.5T or a byte count)");
  };
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  if (s.empty()) throw bad("empty");
  size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.')) pos++;
  if (pos == 0) throw bad("no number");
  std::string num = s.substr(0, pos), unit = s.substr(pos);
  if (num.find('.') != num.rfind('.') || num == ".") throw bad("malformed number");  // "." alone read as 0
  long double value = std::strtold(num.c_str(), nullptr);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();  // "4GB"
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();       // "4Gi"
  int shift = 0;
  if (unit.size() > 1) throw bad("unknown unit");
  if (unit.size() == 1) {
    switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      case 'P': shift = 50; break;
      default: throw bad("unknown unit");
    }
  }
  long double bytes = std::ldexp(value, shift);
  // 2^63 and up: llround's long long cannot hold it (undefined), and no budget is that large.
  if (bytes >= 9223372036854775807.0L) throw bad("too large");
  if (shift == 0 && num.find('.') != std::string::npos) throw bad("fractional byte count");
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string format_size(uint64_t bytes) {
  static const char* units[] = {"B", "K", "M", "G", "T", "P"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    u++;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu%s", static_cast<unsigned long long>(bytes), units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f%s", v, units[u]);
  return buf;
}

}  // namespace prepfs
