#include "prepfs/source/beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "prepfs/common/error.h"

namespace prepfs {
namespace {

// openat2 without a libc wrapper (glibc 2.36 has none). -1 with errno set on failure.
int sys_openat2(int dirfd, const char* path, int flags) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, dirfd, path, &how, sizeof how));
}

// ENOSYS: a kernel before 5.6; EPERM: a seccomp filter that does not know the call.
bool probe_openat2() {
  int fd = sys_openat2(AT_FDCWD, ".", O_PATH | O_CLOEXEC);
  if (fd >= 0) ::close(fd);
  return fd >= 0 || (errno != ENOSYS && errno != EPERM);
}

// The component walk: each directory is opened relative to the one before, never following a
// symlink. Tree paths hold no "", "." or ".." components; refuse them rather than trust them.
int walk(int root_fd, const std::string& rel, int flags) {
  // O_PATH: crossing a directory needs search permission only, as in a plain path lookup.
  int cur = ::openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (cur < 0) return -1;
  size_t pos = 0;
  while (true) {
    size_t slash = rel.find('/', pos);
    const bool last = slash == std::string::npos;
    std::string name = rel.substr(pos, last ? std::string::npos : slash - pos);
    if (name.empty() || name == "." || name == "..") {
      ::close(cur);
      errno = EXDEV;
      return -1;
    }
    int next = ::openat(cur, name.c_str(), last ? flags : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    ::close(cur);
    if (next < 0) {
      errno = err;
      return -1;
    }
    if (last) return next;
    cur = next;
    pos = slash + 1;
  }
}

}  // namespace

bool Beneath::kernel_resolves() {
  static const bool has = probe_openat2();
  return has;
}

int Beneath::open(const std::string& rel, int flags) const {
  flags |= O_CLOEXEC | O_NOFOLLOW;
  // A NUL would end the path early in the kernel's eyes: "a\0x" names "a".
  if (rel.find('\0') != std::string::npos) throw_errno(EXDEV, "open source path " + rel);
  int fd = rel.empty()         ? ::openat(root_fd_, ".", flags)
           : openat2_          ? sys_openat2(root_fd_, rel.c_str(), flags)
                               : walk(root_fd_, rel, flags);
  if (fd < 0) throw_errno(errno, "open source path " + rel);
  return fd;
}

int Beneath::open_parent(const std::string& rel, std::string* leaf) const {
  size_t slash = rel.rfind('/');
  *leaf = slash == std::string::npos ? rel : rel.substr(slash + 1);
  // Only the parent is resolved beneath the root; the leaf goes to *at() calls as is, where ".."
  // would name the parent's parent (the root's, outside the source).
  if (leaf->empty() || *leaf == "." || *leaf == ".." || leaf->find('\0') != std::string::npos)
    throw_errno(EXDEV, "source path " + rel);
  return open(slash == std::string::npos ? std::string() : rel.substr(0, slash), O_PATH | O_DIRECTORY);
}

struct stat Beneath::lstat(const std::string& rel) const {
  struct stat st;
  if (rel.empty()) {
    if (::fstat(root_fd_, &st) != 0) throw_errno(errno, "stat source root");
    return st;
  }
  std::string leaf;
  int dir = open_parent(rel, &leaf);
  int rc = ::fstatat(dir, leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW);
  int err = errno;
  ::close(dir);
  if (rc != 0) throw_errno(err, "stat " + rel);
  return st;
}

std::string Beneath::readlink(const std::string& rel) const {
  std::string leaf;
  int dir = open_parent(rel, &leaf);
  std::string target(PATH_MAX, '\0');
  ssize_t n = ::readlinkat(dir, leaf.c_str(), target.data(), target.size());
  int err = errno;
  ::close(dir);
  if (n < 0) throw_errno(err, "readlink " + rel);
  target.resize(static_cast<size_t>(n));
  return target;
}

}  // namespace prepfs
