// The interface between the FUSE adaptor and the core. Everything here is plain C++: tests drive
// a Filesystem directly, without a mount. Errors are prepfs::Error carrying an errno.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace prepfs {

struct Attr {
  uint64_t ino = 0;
  uint32_t mode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  uint32_t nlink = 1;
  double timeout = 0;  // how long the kernel may cache this entry and its attributes, seconds
  // The owner; kMountingUser for the mount's own entries (and a source without owners and no
  // uid=/gid=): the FUSE adaptor shows the user the daemon runs as.
  static constexpr uint32_t kMountingUser = 0xffffffff;
  uint32_t uid = kMountingUser;
  uint32_t gid = kMountingUser;
};

struct OpenReply {
  uint64_t fh = 0;
  bool keep_cache = false;  // the kernel may keep pages across opens
  bool direct_io = false;   // bypass the page cache (content that changes per open)
  bool needs_open = true;   // false: this file needs no per-open state (kernel may skip OPEN)
};

// A piece of a read reply. `hold` keeps the bytes alive until the reply is sent.
struct Slice {
  std::shared_ptr<const void> hold;
  const char* data = nullptr;
  size_t len = 0;
};

struct FsStat {
  uint64_t blocks = 0, bfree = 0, files = 0;
  uint32_t bsize = 4096, namemax = 255;
};

class Filesystem {
 public:
  virtual ~Filesystem() = default;
  virtual Attr getattr(uint64_t ino) = 0;
  virtual Attr lookup(uint64_t parent, std::string_view name) = 0;
  // Calls emit(name, attr, next_offset) from offset on until it returns false (reply buffer full).
  using DirEmit = std::function<bool(std::string_view name, const Attr& attr, uint64_t next)>;
  virtual void readdir(uint64_t ino, uint64_t offset, const DirEmit& emit) = 0;
  virtual std::string readlink(uint64_t ino) = 0;
  virtual OpenReply open(uint64_t ino, int flags) = 0;
  // The same open, knowing who asks (the FUSE request's uid). Only files whose handles act for
  // their user (a job's order) look at it; the rest ignore it.
  virtual OpenReply open(uint64_t ino, int flags, uint32_t caller_uid) {
    (void)caller_uid;
    return open(ino, flags);
  }
  virtual std::vector<Slice> read(uint64_t ino, uint64_t fh, uint64_t off, size_t size) = 0;
  virtual void release(uint64_t ino, uint64_t fh) = 0;
  virtual FsStat statfs() = 0;
  // Mutations. The data views are read-only; only control files accept writes (commands).
  virtual size_t write(uint64_t ino, uint64_t fh, uint64_t off, std::string_view data);
  virtual Attr truncate(uint64_t ino, uint64_t size);
};

}  // namespace prepfs
