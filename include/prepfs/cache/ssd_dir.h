// The SSD tier's directory: DIR/chunks/XX/ (256 fan-out directories by the key's first two hex
// digits) and DIR/tmp/. Each directory is opened once, checked private (owned by the daemon, not
// writable by others) and never reached through a symlink; everything below is then reached
// relative to its descriptor, and entry files are opened with O_NOFOLLOW and must be regular
// files. Thread-safe.
#pragma once

#include <sys/stat.h>

#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "prepfs/cache/key.h"
#include "prepfs/common/private_dir.h"

namespace prepfs {

class SsdDir {
 public:
  // Creates what is missing, checks every directory, and empties tmp/ (leftovers of a crash
  // mid-write: never renamed into place, so never valid entries). Throws Error.
  explicit SsdDir(const std::string& dir);
  ~SsdDir();
  SsdDir(const SsdDir&) = delete;
  SsdDir& operator=(const SsdDir&) = delete;

  // An entry file for reading, or -1 with errno set (ENOENT when absent, ELOOP for a symlink,
  // EINVAL for anything but a regular file).
  int open_entry(const CacheKey& key, const std::string& name);
  // A new temporary file in tmp/ for writing; its name in *temp_name. -1 with errno set.
  int create_temp(const CacheKey& key, std::string* temp_name);
  // Renames a finished temporary file into place under name. 0, or the errno.
  int publish(const std::string& temp_name, const CacheKey& key, const std::string& name);
  void discard_temp(const std::string& temp_name);
  void unlink_entry(const CacheKey& key, const std::string& name);

  // Every file in the fan-out directories, with its lstat (symlinked fan-out directories are
  // refused and skipped, with a warning). An entry name in another key's fan-out directory is
  // unlinked instead of reported.
  void for_each_file(const std::function<void(const std::string& name, const struct stat& st)>& fn);
  // Bytes available to the daemon on the directory's filesystem.
  uint64_t free_bytes() const;

  const std::string& path() const { return root_.path(); }
  std::string path_of(const CacheKey& key, const std::string& name) const;

 private:
  int fanout_fd(const std::string& fanout, bool create);  // -1 when absent or refused

  PrivateDir root_, chunks_, tmp_;
  std::mutex open_mu_;                            // serializes the opening of fan-out directories
  std::array<std::atomic<int>, 256> fanout_{};    // -1 until opened
  std::array<std::atomic<bool>, 256> refused_{};  // a symlink or a foreign directory: never used
  std::atomic<uint64_t> temp_seq_{0};
};

}  // namespace prepfs
