#include "prepfs/fuse/fuse_connection.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

namespace prepfs {

FuseConnection::~FuseConnection() {
  if (abort_fd_ >= 0) ::close(abort_fd_);
}

FuseConnection::FuseConnection(FuseConnection&& other) noexcept
    : dir_(std::move(other.dir_)), dir_ino_(other.dir_ino_), dir_dev_(other.dir_dev_), abort_fd_(other.abort_fd_) {
  other.abort_fd_ = -1;
}

FuseConnection& FuseConnection::operator=(FuseConnection&& other) noexcept {
  if (this != &other) {
    if (abort_fd_ >= 0) ::close(abort_fd_);
    dir_ = std::move(other.dir_);
    dir_ino_ = other.dir_ino_;
    dir_dev_ = other.dir_dev_;
    abort_fd_ = std::exchange(other.abort_fd_, -1);
  }
  return *this;
}

FuseConnection FuseConnection::hold(unsigned minor, const std::string& root) {
  FuseConnection c;
  c.dir_ = root + "/" + std::to_string(minor);
  // The directory is opened first and the abort file beneath it, so that both are the same
  // connection's even if it ended in between (then the file would not exist).
  int dir_fd = ::open(c.dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return c;
  struct stat st;
  if (::fstat(dir_fd, &st) == 0) {
    c.abort_fd_ = ::openat(dir_fd, "abort", O_WRONLY | O_CLOEXEC);
    c.dir_ino_ = st.st_ino;
    c.dir_dev_ = st.st_dev;
  }
  ::close(dir_fd);
  return c;
}

bool FuseConnection::alive() const {
  if (abort_fd_ < 0) return false;
  struct stat st;
  return ::stat(dir_.c_str(), &st) == 0 && st.st_ino == dir_ino_ && st.st_dev == dir_dev_;
}

bool FuseConnection::abort() const {
  if (abort_fd_ < 0) return false;
  return ::write(abort_fd_, "1", 1) == 1;  // fusectl's files are not seekable: no pwrite
}

}  // namespace prepfs
