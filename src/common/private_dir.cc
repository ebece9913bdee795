#include "prepfs/common/private_dir.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

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

namespace {

// The directory an open descriptor names, as the kernel resolves it (no symlink in it).
std::string canonical_path(int fd, const std::string& path) {
  char target[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0 || target[0] != '/') throw Error(EACCES, "cannot tell where " + path + " is (" + link + ")");
  return std::string(target, static_cast<size_t>(n));
}

// The daemon's own user-private group: its effective gid, with no member listed (a umask of 002,
// as Fedora's default for such users, makes ~/.cache group-writable, by that group alone).
bool own_private_group(gid_t gid) {
  if (gid != getegid()) return false;
  group gr{};
  group* found = nullptr;
  std::vector<char> buf(16384);
  if (getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) != 0 || !found) return false;
  return !found->gr_mem || !found->gr_mem[0];
}

// Every directory above fd (through "..", so the ones that hold it now, whatever path named it)
// must be one only root or the daemon's user can change: owned by one of them, and writable by
// nobody else (its group only if that is the daemon's own private group) unless sticky (as /tmp:
// there nobody may rename another's entry). Else its owner or group could move the checked
// directory away and put their own in its place, and the index and the cache files, reached by
// path later, would be theirs.
void check_ancestors(int fd, const std::string& canonical) {
  int cur = ::dup(fd);
  if (cur < 0) throw_errno(errno, "cannot check the directories above " + canonical);
  std::string above = canonical;
  for (;;) {
    struct stat here, up;
    // O_PATH: no read permission needed (a /home of mode 0711 is still checked).
    const int parent = ::openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    const bool ok = parent >= 0 && ::fstat(cur, &here) == 0 && ::fstat(parent, &up) == 0;
    const int err = errno;
    ::close(cur);
    if (!ok) {
      if (parent >= 0) ::close(parent);
      throw_errno(err, "cannot check the directories above " + canonical);
    }
    if (here.st_dev == up.st_dev && here.st_ino == up.st_ino) {  // "/" is its own parent
      ::close(parent);
      return;
    }
    const size_t slash = above.rfind('/');
    above = slash == 0 || slash == std::string::npos ? "/" : above.substr(0, slash);  // the directory `up` is
    const uid_t me = geteuid();
    const bool owner_ok = up.st_uid == 0 || up.st_uid == me;
    const bool group_may_write = (up.st_mode & S_IWGRP) && !own_private_group(up.st_gid);
    const bool open_to_others = (group_may_write || (up.st_mode & S_IWOTH)) && !(up.st_mode & S_ISVTX);
    if (!owner_ok || open_to_others) {
      ::close(parent);
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(up.st_mode & 07777));
      throw Error(EACCES, canonical + " is inside " + above + " (uid " + std::to_string(up.st_uid) + ", mode " + mode +
                              "), which " + (owner_ok ? "others may write" : "another user owns") +
                              ": they could put another directory in its place; refusing to cache in it");
    }
    cur = parent;
  }
}

}  // namespace

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
  // From here on the directory goes by the path the kernel resolved: a symlink on the way, in a
  // directory someone else may write, would otherwise let them point the path elsewhere later.
  dir.path_ = canonical_path(fd, path);
  check_ancestors(fd, dir.path_);
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
