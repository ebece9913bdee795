#include "prepfs/common/mountinfo.h"

#include <fstream>
#include <sstream>

namespace prepfs {
namespace {

// "\040" -> ' ' (the kernel escapes space, tab, newline and backslash in paths).
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' && s[i + 2] <= '7' &&
        s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

// Fields: id parent major:minor root mount_point options [optional...] - fstype source super_opts
bool parse_mountinfo_line(const std::string& line, MountEntry* out) {
  std::istringstream in(line);
  std::string id, parent, dev, root, point, options, field;
  if (!(in >> id >> parent >> dev >> root >> point >> options)) return false;
  while (in >> field && field != "-") {
  }
  if (field != "-" || !(in >> out->fstype)) return false;
  size_t colon = dev.find(':');
  if (colon == std::string::npos) return false;
  try {
    out->major = static_cast<unsigned>(std::stoul(dev.substr(0, colon)));
    out->minor = static_cast<unsigned>(std::stoul(dev.substr(colon + 1)));
  } catch (const std::exception&) {
    return false;
  }
  out->mount_point = unescape(point);
  return true;
}

std::vector<MountEntry> read_mountinfo() {
  std::vector<MountEntry> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    MountEntry e;
    if (parse_mountinfo_line(line, &e)) out.push_back(std::move(e));
  }
  return out;
}

}  // namespace prepfs
