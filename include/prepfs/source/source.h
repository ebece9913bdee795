// Where the dataset lives. The core sees relative paths ("" is the root, "a/b.jpg") and a
// version per file (FileVersion); it never sees file descriptors, URLs or credentials.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "prepfs/common/stats.h"

namespace prepfs {

// Who owns an entry. A source without owners (S3) leaves both unknown; the mount then shows the
// uid=/gid= options, else the mounting user.
struct Owner {
  static constexpr uint32_t kUnknown = 0xffffffff;  // (uid_t)-1 is no user on Linux
  uint32_t uid = kUnknown;
  uint32_t gid = kUnknown;
  bool operator==(const Owner&) const = default;
  // Each unknown id replaced by fallback's.
  Owner or_else(const Owner& fallback) const {
    return Owner{uid != kUnknown ? uid : fallback.uid, gid != kUnknown ? gid : fallback.gid};
  }
};

struct SourceStat {
  uint32_t mode = 0;  // st_mode: type and permission bits
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  std::string symlink_target;  // symlinks only
  uint64_t identity = 0;       // see FileVersion::identity
  Owner owner = {};
};

// What decides whether a persisted index of a directory can be reused without listing it again.
struct DirFingerprint {
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t ino = 0;
  bool operator==(const DirFingerprint&) const = default;
  // Equal to no directory's: an index recording it is never reused for that directory.
  static constexpr DirFingerprint never() { return {-1, -1, 0}; }
};

// The version of a file's content the cache key was built from; a read checks it.
//
// Size and mtime alone are easy to forge (truncate, touch) by whoever can write the file. A
// directory source adds `identity`, a hash of the device, the inode and the ctime: ctime moves on
// every write, chmod, chown or rename and no user can set it, and a file renamed over another has
// another inode. (The device counts relative to the source root's, 0 for the root's own file
// system, so a remount that renumbers it keeps versions, indexes and cached entries valid.)
// S3 has no such triple: its identity is a 64-bit hash of the ETag (s3_source.h).
struct FileVersion {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint64_t identity = 0;
  bool operator==(const FileVersion&) const = default;
};

inline FileVersion version_of(const SourceStat& st) { return FileVersion{st.size, st.mtime_ns, st.identity}; }

class Source {
 public:
  virtual ~Source() = default;

  // Stable identity of the source ("dir:/data/imagenet"), for the cache directory name and logs.
  virtual std::string identity() const = 0;

  // Visits every entry, each directory before its children; the root is visited as "".
  using Visitor = std::function<void(const std::string& rel, const SourceStat& st)>;
  virtual void scan(const Visitor& visit) = 0;

  // Fresh metadata of one entry. Throws Error(ENOENT) when it is gone.
  virtual SourceStat stat(const std::string& rel) = 0;

  // Fingerprint of a directory, or nullopt where the source has none (then the index is rebuilt).
  virtual std::optional<DirFingerprint> dir_fingerprint(const std::string& rel) = 0;

  // Reads up to len bytes at off of a regular file. Returns fewer only at end of file. Throws
  // Error(EIO) when the file is gone or no longer has the expected version, before or during the
  // read, so changed bytes can never be cached under the old version's key.
  virtual size_t read(const std::string& rel, const FileVersion& expect, uint64_t off, void* buf, size_t len) = 0;

  SourceCounters& counters() { return counters_; }

 protected:
  SourceCounters counters_;
};

}  // namespace prepfs
