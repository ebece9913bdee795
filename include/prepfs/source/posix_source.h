// A directory source (local disk, NFS, any mounted file system). Reads go through io_uring.
#pragma once

#include <sys/stat.h>

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "prepfs/source/beneath.h"
#include "prepfs/source/source.h"

namespace prepfs {

class PosixSource final : public Source {
 public:
  // Throws Error with a clear message when root is missing or not a directory.
  explicit PosixSource(const std::string& root);
  ~PosixSource() override;

  std::string identity() const override;
  void scan(const Visitor& visit) override;
  SourceStat stat(const std::string& rel) override;
  std::optional<DirFingerprint> dir_fingerprint(const std::string& rel) override;
  size_t read(const std::string& rel, const FileVersion& expect, uint64_t off, void* buf, size_t len) override;

 private:
  struct OpenFile;
  // A descriptor of rel checked to have version `expect` when it was opened (cached or fresh).
  std::shared_ptr<OpenFile> open_file(const std::string& rel, const FileVersion& expect);
  void forget_open_file(const std::string& rel, const std::shared_ptr<OpenFile>& file);
  void check_version(const std::string& rel, const FileVersion& expect, const FileVersion& found);
  void scan_dir(int dirfd, const std::string& rel, const Visitor& visit);
  uint64_t identity_of(const struct stat& st) const;
  FileVersion stat_version(const struct stat& st) const;
  template <class ReadLink>
  SourceStat to_source_stat(const struct stat& st, ReadLink read_link) const;

  void listed_partly(const std::string& rel);

  std::string root_;
  int root_fd_ = -1;
  // Directories the last scan could not list whole (an entry or a subdirectory it could not
  // read: EACCES, an NFS EIO): their fingerprints match nothing, so the next mount lists them
  // again instead of reusing an index that misses their files until they change.
  std::mutex partly_mu_;
  std::unordered_set<std::string> partly_listed_;
  dev_t root_dev_ = 0;
  Beneath beneath_;  // every path below the root resolves through it: nothing outside is reachable

  // Large files are read chunk by chunk; keeping a few descriptors open saves an open() (a round
  // trip on NFS) per chunk. Small LRU; entries are shared so a close never races a read. A cached
  // descriptor saves the open, not the check: every read fstat()s it afterwards.
  static constexpr size_t kMaxOpenFiles = 64;
  std::mutex fd_mu_;
  std::list<std::string> fd_lru_;
  std::unordered_map<std::string, std::pair<std::shared_ptr<OpenFile>, std::list<std::string>::iterator>> fds_;
};

}  // namespace prepfs
