// The mount table of this process (/proc/self/mountinfo), parsed once in one place: the FUSE
// front door asks it whether a mountpoint is taken and which connection a mount is.
#pragma once

#include <string>
#include <vector>

namespace prepfs {

struct MountEntry {
  unsigned major = 0, minor = 0;  // st_dev of the mounted file system (a FUSE connection's id is its minor)
  std::string mount_point;        // absolute, with the kernel's octal escapes (\040 ...) decoded
  std::string fstype;             // "fuse.prepfs", "ext4", ...
};

// Every mount, in the kernel's order (a later entry for the same point is mounted on top).
std::vector<MountEntry> read_mountinfo();
// One line of the file; false when it does not parse.
bool parse_mountinfo_line(const std::string& line, MountEntry* out);

}  // namespace prepfs
