// One FUSE connection's entry in fusectl (/sys/fs/fuse/connections/<minor>), held from the mount
// on, so that stopping can abort the connection a user still holds, and only that one.
//
// Why held, not looked up by path when needed: a connection's number is its device minor, and
// the kernel gives an ended connection's minor to the next FUSE mount (the lowest free one). By
// the time a stop acts, "/sys/fs/fuse/connections/<minor>" may already be another file
// system's, and writing its abort file would cut that file system off. The abort file opened at
// mount time stays bound to our connection (fusectl detaches it when the connection ends, and a
// write then does nothing), and the directory's inode number tells ours from a successor's.
#pragma once

#include <sys/types.h>

#include <string>

namespace prepfs {

inline constexpr const char* kFusectlRoot = "/sys/fs/fuse/connections";

class FuseConnection {
 public:
  FuseConnection() = default;
  ~FuseConnection();
  FuseConnection(FuseConnection&& other) noexcept;
  FuseConnection& operator=(FuseConnection&& other) noexcept;
  FuseConnection(const FuseConnection&) = delete;
  FuseConnection& operator=(const FuseConnection&) = delete;

  // Holds connection `minor` under `root`. Call it right after the mount, while the minor is
  // surely ours. Without fusectl (or the entry) the result holds nothing: alive() is false and
  // abort() does nothing.
  static FuseConnection hold(unsigned minor, const std::string& root = kFusectlRoot);

  bool held() const { return abort_fd_ >= 0; }
  // Our connection still exists: its directory is there and is the one held (not a successor
  // that took the same minor).
  bool alive() const;
  // Aborts our connection: pending and future requests fail with ENOTCONN. Never touches another
  // connection; nothing happens if ours has ended. True if the write was accepted.
  bool abort() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  ino_t dir_ino_ = 0;
  dev_t dir_dev_ = 0;
  int abort_fd_ = -1;
};

}  // namespace prepfs
