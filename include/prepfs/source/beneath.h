// Path resolution that cannot leave a directory: every component of a relative path is resolved
// beneath the root without following a symlink anywhere, so a directory of the source swapped for
// a symlink (to /etc, say) makes the path fail instead of reaching outside.
//
// Uses openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) where the kernel has it (Linux 5.6; probed
// once at run time), else walks the path one component at a time with O_NOFOLLOW | O_DIRECTORY.
#pragma once

#include <sys/stat.h>

#include <string>

namespace prepfs {

class Beneath {
 public:
  // use_openat2=false forces the component walk (tests cover both ways).
  explicit Beneath(int root_fd, bool use_openat2 = kernel_resolves()) : root_fd_(root_fd), openat2_(use_openat2) {}

  // Opens rel ("" is the root) with flags (O_CLOEXEC and O_NOFOLLOW are added). Throws Error:
  // ELOOP (or EXDEV) when a component is a symlink or escapes, ENOENT, ENOTDIR, EACCES...
  int open(const std::string& rel, int flags) const;

  // lstat(2) of rel: its last component may itself be a symlink (it is described, not followed).
  struct stat lstat(const std::string& rel) const;

  // readlink(2) of rel, whose last component is a symlink.
  std::string readlink(const std::string& rel) const;

  // Whether this process resolves with openat2 (false: the component walk).
  static bool kernel_resolves();

 private:
  int open_parent(const std::string& rel, std::string* leaf) const;  // the directory holding rel
  int root_fd_;
  bool openat2_;
};

}  // namespace prepfs
