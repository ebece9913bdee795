#include "prepfs/source/posix_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <memory>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/io/uring.h"

namespace prepfs {
namespace {

int64_t ns_of(const timespec& ts) { return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec; }

std::string readlink_at(int dirfd, const char* name) {
  std::string target(PATH_MAX, '\0');
  ssize_t n = readlinkat(dirfd, name, target.data(), target.size());
  if (n < 0) throw_errno(errno, std::string("readlink ") + name);
  target.resize(static_cast<size_t>(n));
  return target;
}

// Errors of a path that no longer names the indexed file: deleted, or a component replaced by a
// symlink or a file. For a reader that is a version change like any other: EIO.
bool no_longer_reachable(int err) {
  return err == ENOENT || err == ENOTDIR || err == ELOOP || err == EXDEV || err == EAGAIN || err == EISDIR;
}

int open_root(const std::string& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOTDIR) throw Error(ENOTDIR, "source " + root + " is not a directory");
    throw_errno(err, "source " + root);
  }
  return fd;
}

dev_t device_of(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? st.st_dev : 0;  // fstat of an open directory does not fail
}

}  // namespace

// See FileVersion::identity.
uint64_t PosixSource::identity_of(const struct stat& st) const {
  struct {
    uint64_t dev, ino;
    int64_t ctime_ns;
  } id{st.st_dev == root_dev_ ? 0 : uint64_t(st.st_dev), uint64_t(st.st_ino), ns_of(st.st_ctim)};
  return XXH3_64bits(&id, sizeof id);
}

FileVersion PosixSource::stat_version(const struct stat& st) const {
  return FileVersion{static_cast<uint64_t>(st.st_size), ns_of(st.st_mtim), identity_of(st)};
}

// st as a SourceStat; read_link gives a symlink's target.
template <class ReadLink>
SourceStat PosixSource::to_source_stat(const struct stat& st, ReadLink read_link) const {
  SourceStat s;
  s.mode = st.st_mode;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = ns_of(st.st_mtim);
  s.identity = identity_of(st);
  s.owner = Owner{st.st_uid, st.st_gid};
  if (S_ISLNK(st.st_mode)) {
    s.symlink_target = read_link();
    s.size = s.symlink_target.size();
  }
  return s;
}

struct PosixSource::OpenFile {
  int fd = -1;
  FileVersion version;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

PosixSource::PosixSource(const std::string& root)
    : root_(root), root_fd_(open_root(root)), root_dev_(device_of(root_fd_)), beneath_(root_fd_) {
  char resolved[PATH_MAX];
  if (realpath(root.c_str(), resolved)) root_ = resolved;
}

PosixSource::~PosixSource() {
  if (root_fd_ >= 0) ::close(root_fd_);
}

std::string PosixSource::identity() const { return "dir:" + root_; }

void PosixSource::scan(const Visitor& visit) {
  struct stat st;
  if (fstat(root_fd_, &st) != 0) throw_errno(errno, "stat " + root_);
  visit("", to_source_stat(st, [] { return std::string(); }));
  {
    std::lock_guard lock(partly_mu_);
    partly_listed_.clear();
  }
  int fd = ::openat(root_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(errno, "open " + root_);
  scan_dir(fd, "", visit);
}

// Takes ownership of dirfd. Entries are visited in name order so the scan is deterministic.
void PosixSource::scan_dir(int dirfd, const std::string& rel, const Visitor& visit) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(fdopendir(dirfd), closedir);  // closed however the scan ends
  if (!dir) {
    ::close(dirfd);
    throw_errno(errno, "opendir " + root_ + "/" + rel);
  }
  std::vector<std::string> names;
  for (;;) {
    // NULL is the end or an error (an NFS server gone away): a listing cut short must not pass
    // for the whole directory, so the scan fails and says why.
    errno = 0;
    dirent* de = readdir(dir.get());
    if (!de) {
      if (errno != 0) throw_errno(errno, "list " + root_ + "/" + rel);
      break;
    }
    std::string name = de->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> subdirs;
  for (const std::string& name : names) {
    struct stat st;
    if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      spdlog::warn("source: skipping {}/{}: {}", rel, name, std::strerror(errno));
      listed_partly(rel);
      continue;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) continue;  // fifos, devices
    std::string child = rel.empty() ? name : rel + "/" + name;
    // No path of PATH_MAX bytes or more resolves (openat2: ENAMETOOLONG), so nothing that deep
    // could be read; and leaving it out bounds the scan's depth, which a writer to the source
    // could otherwise make as deep as it likes (a directory and a path kept per level).
    if (child.size() >= PATH_MAX) {
      spdlog::warn("source: skipping {}/{}...: the path is longer than {} bytes", rel.substr(0, 64),
                   name.substr(0, 64), PATH_MAX - 1);
      listed_partly(rel);
      continue;
    }
    SourceStat entry;
    try {
      entry = to_source_stat(st, [&] { return readlink_at(dirfd, name.c_str()); });
    } catch (const Error& e) {  // a symlink removed or replaced since its stat: skipped like one gone
      spdlog::warn("source: skipping {}: {}", child, e.what());
      listed_partly(rel);
      continue;
    }
    visit(child, entry);
    if (S_ISDIR(st.st_mode)) subdirs.push_back(name);
  }
  for (const std::string& name : subdirs) {
    std::string child = rel.empty() ? name : rel + "/" + name;
    int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      spdlog::warn("source: cannot open directory {}: {}", child, std::strerror(errno));
      listed_partly(child);  // in the tree, empty
      continue;
    }
    scan_dir(fd, child, visit);
  }
}

SourceStat PosixSource::stat(const std::string& rel) {
  return to_source_stat(beneath_.lstat(rel), [&] { return beneath_.readlink(rel); });
}

void PosixSource::listed_partly(const std::string& rel) {
  std::lock_guard lock(partly_mu_);
  partly_listed_.insert(rel);
}

std::optional<DirFingerprint> PosixSource::dir_fingerprint(const std::string& rel) {
  {
    std::lock_guard lock(partly_mu_);
    if (partly_listed_.count(rel)) return DirFingerprint::never();
  }
  struct stat st;
  try {
    st = beneath_.lstat(rel);
  } catch (const Error&) {
    st.st_mode = 0;
  }
  if (!S_ISDIR(st.st_mode)) return DirFingerprint::never();  // gone or replaced
  return DirFingerprint{ns_of(st.st_mtim), ns_of(st.st_ctim), st.st_ino};
}

std::shared_ptr<PosixSource::OpenFile> PosixSource::open_file(const std::string& rel, const FileVersion& expect) {
  {
    std::lock_guard lock(fd_mu_);
    auto it = fds_.find(rel);
    if (it != fds_.end() && it->second.first->version == expect) {
      fd_lru_.splice(fd_lru_.begin(), fd_lru_, it->second.second);
      return it->second.first;
    }
  }
  auto file = std::make_shared<OpenFile>();
  bump(counters_.opens);
  try {
    // O_NONBLOCK: a path swapped for a FIFO must not hang the open; cleared once it is a file.
    file->fd = beneath_.open(rel, O_RDONLY | O_NONBLOCK);
  } catch (const Error& e) {
    if (!no_longer_reachable(e.err())) throw;
    bump(counters_.changed);
    spdlog::warn("source file {} is gone or no longer reachable beneath the source root: {}", rel, e.what());
    throw Error(EIO, "source file " + rel + " vanished");
  }
  struct stat st;
  if (fstat(file->fd, &st) != 0) throw_errno(errno, "stat source file " + rel);
  if (!S_ISREG(st.st_mode)) throw Error(EIO, "source file " + rel + " is no longer a regular file");
  // io_uring would answer EAGAIN rather than wait for the disk on a non-blocking descriptor.
  if (fcntl(file->fd, F_SETFL, fcntl(file->fd, F_GETFL) & ~O_NONBLOCK) != 0) throw_errno(errno, "fcntl " + rel);
  file->version = stat_version(st);
  check_version(rel, expect, file->version);
  std::lock_guard lock(fd_mu_);
  auto it = fds_.find(rel);
  if (it != fds_.end()) {
    fd_lru_.erase(it->second.second);
    fds_.erase(it);
  }
  fd_lru_.push_front(rel);
  fds_[rel] = {file, fd_lru_.begin()};
  if (fds_.size() > kMaxOpenFiles) {
    fds_.erase(fd_lru_.back());
    fd_lru_.pop_back();
  }
  return file;
}

void PosixSource::forget_open_file(const std::string& rel, const std::shared_ptr<OpenFile>& file) {
  std::lock_guard lock(fd_mu_);
  auto it = fds_.find(rel);
  if (it == fds_.end() || it->second.first != file) return;
  fd_lru_.erase(it->second.second);
  fds_.erase(it);
}

void PosixSource::check_version(const std::string& rel, const FileVersion& expect, const FileVersion& found) {
  if (found == expect) return;
  bump(counters_.changed);
  spdlog::warn(
      "source file {} changed since it was indexed (size {} -> {}{}); refusing to serve mixed versions. "
      "Set metadata_ttl to pick up changes.",
      rel, expect.size, found.size, found.size == expect.size ? ", rewritten" : "");
  throw Error(EIO, "source file " + rel + " changed");
}

size_t PosixSource::read(const std::string& rel, const FileVersion& expect, uint64_t off, void* buf, size_t len) {
  auto start = std::chrono::steady_clock::now();
  SourceBusy busy(counters_);
  try {
    auto file = open_file(rel, expect);
    size_t n = 0;
    try {
      n = io::pread_full(file->fd, buf, len, off);
      // Checked again after the read, through the same descriptor: a write before or during the
      // read moved the ctime (the kernel updates it before copying data), a deletion the link
      // count (and the ctime). Either way the bytes may belong to another version: none are served.
      struct stat st;
      if (fstat(file->fd, &st) != 0) throw_errno(errno, "stat source file " + rel);
      check_version(rel, expect, stat_version(st));
      if (st.st_nlink == 0) {
        bump(counters_.changed);
        throw Error(EIO, "source file " + rel + " was deleted");
      }
    } catch (const Error&) {
      // A descriptor that failed (a stale NFS handle, a changed file) is not used again: the next
      // read opens the file afresh.
      forget_open_file(rel, file);
      throw;
    }
    bump(counters_.reads);
    bump(counters_.bytes, n);
    auto ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    bump(counters_.read_ns, ns);
    counters_.read_latency.record(ns);
    return n;
  } catch (...) {
    bump(counters_.errors);
    throw;
  }
}

}  // namespace prepfs
