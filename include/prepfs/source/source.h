// Where the dataset lives. The core sees relative paths ("" is the root, "a/b.jpg") and a
// version (size + mtime) per file; it never sees file descriptors, URLs or credentials.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "prepfs/common/stats.h"

namespace prepfs {

struct SourceStat {
  uint32_t mode = 0;  // st_mode: type and permission bits
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  std::string symlink_target;  // symlinks only
};

// What decides whether a persisted index of a directory can be reused without listing it again.
struct DirFingerprint {
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  uint64_t ino = 0;
  bool operator==(const DirFingerprint&) const = default;
};

// The version of a file's content the cache key was built from; a read checks it.
struct FileVersion {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

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
  // Error(EIO) when the file no longer has the expected version, so changed bytes can never be
  // cached under the old version's key.
  virtual size_t read(const std::string& rel, const FileVersion& expect, uint64_t off, void* buf, size_t len) = 0;

  SourceCounters& counters() { return counters_; }

 protected:
  SourceCounters counters_;
};

}  // namespace prepfs
