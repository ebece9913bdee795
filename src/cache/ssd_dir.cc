#include "prepfs/cache/ssd_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "prepfs/cache/ssd_entry.h"
#include "prepfs/common/error.h"

namespace prepfs {
namespace {

// The names in an open directory (its descriptor stays open: fdopendir works on a duplicate).
std::vector<std::string> list_names(int dir_fd) {
  std::vector<std::string> names;
  int dup_fd = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return names;
  DIR* d = ::fdopendir(dup_fd);
  if (!d) {
    ::close(dup_fd);
    return names;
  }
  ::rewinddir(d);
  while (dirent* de = ::readdir(d))
    if (de->d_name[0] != '.') names.emplace_back(de->d_name);
  ::closedir(d);
  return names;
}

int fanout_index(const std::string& fanout) { return std::stoi(fanout, nullptr, 16); }

}  // namespace

SsdDir::SsdDir(const std::string& dir) : root_(PrivateDir::open_path(dir)) {
  chunks_ = root_.open_sub("chunks", true);
  tmp_ = root_.open_sub("tmp", true);
  for (auto& fd : fanout_) fd.store(-1);
  for (const std::string& name : list_names(tmp_.fd())) ::unlinkat(tmp_.fd(), name.c_str(), 0);
}

SsdDir::~SsdDir() {
  for (auto& fd : fanout_)
    if (fd.load() >= 0) ::close(fd.load());
}

int SsdDir::fanout_fd(const std::string& fanout, bool create) {
  const int i = fanout_index(fanout);
  std::atomic<int>& slot = fanout_[i];
  int fd = slot.load(std::memory_order_acquire);
  if (fd >= 0) return fd;
  if (refused_[i].load(std::memory_order_relaxed)) {
    errno = ENOTDIR;
    return -1;
  }
  std::lock_guard lock(open_mu_);
  fd = slot.load(std::memory_order_acquire);
  if (fd >= 0) return fd;
  try {
    fd = chunks_.open_sub(fanout, create).release();  // kept for the tier's life
  } catch (const Error& e) {
    // Refused for good only when something else stands there (a symlink, a file, a directory
    // of another owner or mode): a full disk or a shortage of descriptors passes, and the next
    // use tries again.
    if (e.err() == ENOTDIR || e.err() == ELOOP || e.err() == EXDEV || e.err() == EACCES || e.err() == EPERM) {
      spdlog::warn("ssd tier: {}; entries under it are misses", e.what());
      refused_[i].store(true, std::memory_order_relaxed);
    }
    errno = e.err();
    return -1;
  }
  slot.store(fd, std::memory_order_release);
  return fd;
}

int SsdDir::open_entry(const CacheKey& key, const std::string& name) {
  int dir = fanout_fd(fanout_name(key), false);
  if (dir < 0) return -1;
  // O_NONBLOCK: a FIFO planted under an entry's name must not block the reader; it is refused
  // below like any other file that is not a regular one.
  int fd = ::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    errno = EINVAL;
    return -1;
  }
  // Blocking again for the read: io_uring answers a non-blocking read that must wait for the
  // disk with EAGAIN where the file system has no nowait support, and that read would fail.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

int SsdDir::create_temp(const CacheKey& key, std::string* temp_name) {
  *temp_name = key.hex() + "." + std::to_string(temp_seq_.fetch_add(1));
  return ::openat(tmp_.fd(), temp_name->c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
}

int SsdDir::publish(const std::string& temp_name, const CacheKey& key, const std::string& name) {
  int dir = fanout_fd(fanout_name(key), true);
  if (dir < 0) return errno;
  return ::renameat(tmp_.fd(), temp_name.c_str(), dir, name.c_str()) == 0 ? 0 : errno;
}

void SsdDir::discard_temp(const std::string& temp_name) { ::unlinkat(tmp_.fd(), temp_name.c_str(), 0); }

void SsdDir::unlink_entry(const CacheKey& key, const std::string& name) {
  int dir = fanout_fd(fanout_name(key), false);
  if (dir >= 0) ::unlinkat(dir, name.c_str(), 0);
}

void SsdDir::for_each_file(const std::function<void(const std::string&, const struct stat&)>& fn) {
  for (const std::string& fanout : list_names(chunks_.fd())) {
    if (!is_fanout_name(fanout)) continue;
    int dir = fanout_fd(fanout, false);
    if (dir < 0) continue;  // a symlink or a foreign directory: refused, logged
    for (const std::string& name : list_names(dir)) {
      // An entry's name in another key's fan-out directory is no entry of ours (a stray copy):
      // removed here, where it is. Reported, it was taken for the key's own file, whose removal
      // as junk then hit the good file in the right directory.
      const std::optional<EntryName> entry = parse_entry_name(name);
      if (entry && fanout_name(entry->key) != fanout) {
        ::unlinkat(dir, name.c_str(), 0);
        continue;
      }
      struct stat st;
      if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) fn(name, st);
    }
  }
}

uint64_t SsdDir::free_bytes() const {
  struct statvfs vfs;
  if (::fstatvfs(root_.fd(), &vfs) != 0) return 0;
  return uint64_t(vfs.f_bavail) * vfs.f_frsize;
}

std::string SsdDir::path_of(const CacheKey& key, const std::string& name) const {
  return chunks_.path() + "/" + fanout_name(key) + "/" + name;
}

}  // namespace prepfs
