// Turns S3 object keys into a tree the core can index. Keys are flat names; a tree needs rules
// for the keys that do not map to a safe path. The rules (also in docs/ARCHITECTURE.md):
//   - a key ending in '/' is a directory marker: it makes (or confirms) a directory, never a file;
//   - a key with an empty segment (leading '/', "a//b"), a "." or ".." segment, a segment over
//     255 bytes, or a NUL byte is skipped;
//   - a key that is both an object and a prefix of other keys ("a/b" and "a/b/c") is a directory;
//     the object "a/b" is skipped.
// Every skip is counted per reason and the first of each reason is logged with its key; no path
// produced here can contain "..", ".", an empty segment or a leading '/', so nothing lands
// outside the mount.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "prepfs/source/source.h"

namespace prepfs::s3 {

enum class SkipReason { empty_segment, dot_segment, long_name, nul_byte, shadowed_by_prefix, huge_size, kCount };
const char* skip_reason_text(SkipReason r);

struct TreeEntry {
  std::string path;  // relative, "" for the root
  SourceStat st;
};

class KeyTree {
 public:
  // rel_key: the key with the mount's prefix removed; identity: its FileVersion::identity.
  void add(std::string_view rel_key, uint64_t size, int64_t mtime_ns, uint64_t identity = 0);
  // All entries: the root "" first, then in byte order of the path, which puts every directory
  // before its children. Directory mtimes are the newest object mtime beneath them.
  std::vector<TreeEntry> finish();

  uint64_t skipped(SkipReason r) const { return skipped_[static_cast<int>(r)]; }
  uint64_t dir_markers() const { return dir_markers_; }

 private:
  void skip(SkipReason r, std::string_view key);
  void add_dirs(std::string_view dir, int64_t mtime_ns);

  struct File {
    std::string path;
    uint64_t size;
    int64_t mtime_ns;
    uint64_t identity;
  };
  std::vector<File> files_;
  std::unordered_map<std::string, int64_t> dirs_;  // path -> newest mtime beneath
  uint64_t skipped_[static_cast<int>(SkipReason::kCount)] = {};
  uint64_t dir_markers_ = 0;
};

// File and directory modes the S3 source reports (objects have none).
inline constexpr uint32_t kS3FileMode = 0100644;
inline constexpr uint32_t kS3DirMode = 0040755;

}  // namespace prepfs::s3
