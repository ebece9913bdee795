// Directories only the daemon may write: the cache directory, the SSD tier's files and the index
// name every cached file and hold bytes that are served as the source's, so a directory another
// user can write (or replace by a symlink) would let them plant data. Each is opened once and
// checked (owned by the daemon's effective uid, not writable by group or others); everything
// below it is reached relative to its descriptor with O_NOFOLLOW.
#pragma once

#include <string>
#include <utility>

namespace prepfs {

// An open, checked directory; closes its descriptor on destruction.
class PrivateDir {
 public:
  PrivateDir() = default;
  // The directory at path, created (mode 0700, parents too) when missing. The path itself may go
  // through symlinks (a user's choice); the directory it names must pass the check, and so must,
  // less strictly, every directory above it (owned by root or the daemon's user, and writable by
  // nobody else unless sticky, as /tmp). path() is then the resolved path, free of symlinks.
  // Throws Error with one clear sentence otherwise.
  static PrivateDir open_path(const std::string& path);
  // The subdirectory `name` of this one, created with mode 0700 when missing (when `create`),
  // never through a symlink, checked and tightened to 0700 (it is ours). Throws Error; ENOENT when
  // it is missing and not created.
  PrivateDir open_sub(const std::string& name, bool create) const;

  ~PrivateDir();
  PrivateDir(PrivateDir&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  PrivateDir& operator=(PrivateDir&& o) noexcept;
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }  // the caller closes it

 private:
  PrivateDir(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
};

// Throws Error(EACCES) unless the open directory fd is owned by the effective uid and is not
// writable by group or others; `what` names it in the message.
void check_private_dir(int fd, const std::string& what);

}  // namespace prepfs
