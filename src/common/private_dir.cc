#include "prepfs/common/private_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "prepfs/common/error.h"

namespace prepfs {

void check_private_dir(int fd, const std::string& what) {
  struct stat st;
  if (fstat(fd, &st) != 0) throw_errno(errno, "cannot stat " + what);
  if (!S_ISDIR(st.st_mode)) throw Error(ENOTDIR, what + " is not a directory");
  if (st.st_uid != geteuid())
    throw Error(EACCES, what + " is owned by uid " + std::to_string(st.st_uid) + ", not by the daemon's uid " +
                            std::to_string(geteuid()) + ": refusing to cache in it");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 07777));
    throw Error(EACCES, what + " is writable by its group or by others (mode " + mode + "): refusing to cache in it");
  }
}

PrivateDir PrivateDir::open_path(const std::string& path) {
  if (path.empty()) throw Error(EINVAL, "empty cache directory path");
  // Missing parents are created private too (a cache directory tree is nobody else's business).
  for (size_t i = 1; i <= path.size(); i++) {
    if (i == path.size() || path[i] == '/') {
      std::string cur = path.substr(0, i);
      if (::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) throw_errno(errno, "cannot create " + cur);
    }
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(errno, "cannot open " + path);
  PrivateDir dir(fd, path);
  check_private_dir(fd, path);
  return dir;
}

PrivateDir PrivateDir::open_sub(const std::string& name, bool create) const {
  const std::string sub = path_ + "/" + name;
  if (create && ::mkdirat(fd_, name.c_str(), 0700) != 0 && errno != EEXIST) throw_errno(errno, "cannot create " + sub);
  int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP || err == ENOTDIR)
      throw Error(ENOTDIR, sub + " is a symlink or not a directory: refusing to follow it");
    throw_errno(err, "cannot open " + sub);
  }
  PrivateDir dir(fd, sub);
  check_private_dir(fd, sub);
  if (::fchmod(fd, 0700) != 0) throw_errno(errno, "cannot chmod " + sub);
  return dir;
}

PrivateDir::~PrivateDir() {
  if (fd_ >= 0) ::close(fd_);
}

PrivateDir& PrivateDir::operator=(PrivateDir&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

}  // namespace prepfs
