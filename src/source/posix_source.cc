#include "prepfs/source/posix_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/io/uring.h"

namespace prepfs {
namespace {

int64_t ns_of(const timespec& ts) { return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec; }

SourceStat to_source_stat(int dirfd, const char* name, const struct stat& st) {
  SourceStat s;
  s.mode = st.st_mode;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = ns_of(st.st_mtim);
  if (S_ISLNK(st.st_mode)) {
    std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
    if (target.size() < 2) target.resize(PATH_MAX);
    ssize_t n = readlinkat(dirfd, name, target.data(), target.size());
    if (n < 0) throw_errno(errno, std::string("readlink ") + name);
    target.resize(static_cast<size_t>(n));
    s.symlink_target = std::move(target);
    s.size = s.symlink_target.size();
  }
  return s;
}

// "" means the root itself, which openat/fstatat spell ".".
const char* at_path(const std::string& rel) { return rel.empty() ? "." : rel.c_str(); }

}  // namespace

struct PosixSource::OpenFile {
  int fd = -1;
  FileVersion version;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

PosixSource::PosixSource(const std::string& root) : root_(root) {
  root_fd_ = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd_ < 0) {
    int err = errno;
    if (err == ENOTDIR) throw Error(ENOTDIR, "source " + root + " is not a directory");
    throw_errno(err, "source " + root);
  }
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
  visit("", to_source_stat(root_fd_, ".", st));
  int fd = ::openat(root_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(errno, "open " + root_);
  scan_dir(fd, "", visit);
}

// Takes ownership of dirfd. Entries are visited in name order so the scan is deterministic.
void PosixSource::scan_dir(int dirfd, const std::string& rel, const Visitor& visit) {
  DIR* dir = fdopendir(dirfd);
  if (!dir) {
    ::close(dirfd);
    throw_errno(errno, "opendir " + root_ + "/" + rel);
  }
  std::vector<std::string> names;
  while (dirent* de = readdir(dir)) {
    std::string name = de->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  std::vector<std::string> subdirs;
  for (const std::string& name : names) {
    struct stat st;
    if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      spdlog::warn("source: skipping {}/{}: {}", rel, name, std::strerror(errno));
      continue;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) continue;  // fifos, devices
    std::string child = rel.empty() ? name : rel + "/" + name;
    visit(child, to_source_stat(dirfd, name.c_str(), st));
    if (S_ISDIR(st.st_mode)) subdirs.push_back(name);
  }
  for (const std::string& name : subdirs) {
    std::string child = rel.empty() ? name : rel + "/" + name;
    int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      spdlog::warn("source: cannot open directory {}: {}", child, std::strerror(errno));
      continue;
    }
    scan_dir(fd, child, visit);
  }
  closedir(dir);
}

SourceStat PosixSource::stat(const std::string& rel) {
  struct stat st;
  if (fstatat(root_fd_, at_path(rel), &st, AT_SYMLINK_NOFOLLOW) != 0) throw_errno(errno, "stat " + rel);
  return to_source_stat(root_fd_, at_path(rel), st);
}

std::optional<DirFingerprint> PosixSource::dir_fingerprint(const std::string& rel) {
  struct stat st;
  if (fstatat(root_fd_, at_path(rel), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
    return DirFingerprint{-1, -1, 0};  // gone or replaced: never equal to a stored fingerprint
  return DirFingerprint{ns_of(st.st_mtim), ns_of(st.st_ctim), st.st_ino};
}

std::shared_ptr<PosixSource::OpenFile> PosixSource::open_file(const std::string& rel, const FileVersion& expect) {
  {
    std::lock_guard lock(fd_mu_);
    auto it = fds_.find(rel);
    if (it != fds_.end() && it->second.first->version.size == expect.size &&
        it->second.first->version.mtime_ns == expect.mtime_ns) {
      fd_lru_.splice(fd_lru_.begin(), fd_lru_, it->second.second);
      return it->second.first;
    }
  }
  auto file = std::make_shared<OpenFile>();
  file->fd = ::openat(root_fd_, rel.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  bump(counters_.opens);
  if (file->fd < 0) throw_errno(errno, "open source file " + rel);
  struct stat st;
  if (fstat(file->fd, &st) != 0) throw_errno(errno, "stat source file " + rel);
  file->version = {static_cast<uint64_t>(st.st_size), ns_of(st.st_mtim)};
  if (file->version.size != expect.size || file->version.mtime_ns != expect.mtime_ns) {
    spdlog::warn(
        "source file {} changed since it was indexed (size {} -> {}); refusing to serve "
        "mixed versions. Set metadata_ttl to pick up changes.",
        rel, expect.size, file->version.size);
    throw Error(EIO, "source file " + rel + " changed");
  }
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

size_t PosixSource::read(const std::string& rel, const FileVersion& expect, uint64_t off, void* buf, size_t len) {
  auto start = std::chrono::steady_clock::now();
  SourceBusy busy(counters_);
  try {
    auto file = open_file(rel, expect);
    size_t n = io::pread_full(file->fd, buf, len, off);
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
