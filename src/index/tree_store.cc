#include "prepfs/index/tree_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "prepfs/common/error.h"
#include "prepfs/common/fs_util.h"
#include "prepfs/index/image_probe.h"
#include "prepfs/index/index_format.h"
#include "prepfs/io/uring.h"

namespace prepfs {
namespace {

// Present while the index on disk may describe files that changed since (see mark_index_stale).
std::string stale_marker(const std::string& index_path) { return index_path + ".stale"; }

}  // namespace

void save_tree(const Tree& tree, Source& source, const std::string& path) {
  std::string bytes = encode_index(tree, source);
  std::string tmp = path + ".tmp";
  // Private (0600): the index names every file of the source.
  int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw_errno(errno, "write index " + tmp);
  // On disk before the rename, so that a crash leaves the old index or the new one, never a
  // renamed file with no data (the checksum would refuse it, at the cost of a rescan). A failed
  // save removes its temporary file: on a full disk (the likeliest failure) it would hold up to
  // an index's size of the space that is short.
  auto fail = [&](int err, const std::string& what) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw_errno(err, what);
  };
  try {
    io::pwrite_full(fd, bytes.data(), bytes.size(), 0);
  } catch (const Error& e) {
    fail(e.err(), "write index " + tmp);
  }
  if (::fsync(fd) != 0) fail(errno, "write index " + tmp);
  ::close(fd);
  fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(errno, "rename index " + path);
  // The marker goes only once the rename is durable: the other order could leave the old index
  // without its marker after a crash.
  // Some file systems cannot sync a directory (EINVAL): the index stands, only less durable.
  if (const int err = sync_parent_dir(path)) {
    if (err != EINVAL && err != ENOTSUP && err != EROFS) throw_errno(err, "sync the directory of " + path);
    spdlog::info("the directory of the metadata index {} cannot be synced ({}); a crash may lose the save", path,
                 std::strerror(err));
  }
  ::unlink(stale_marker(path).c_str());
}

void mark_index_stale(const std::string& path) {
  int fd = ::open(stale_marker(path).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    spdlog::warn("cannot mark the metadata index {} stale: {}; the next mount may reuse it", path,
                 std::strerror(errno));
    return;
  }
  ::close(fd);
  // Durable, as the marker is what keeps a crash from reusing an index that is out of date.
  if (const int err = sync_parent_dir(stale_marker(path)))
    spdlog::warn("cannot sync the stale mark of the metadata index {}: {}; a crash may lose it", path,
                 std::strerror(err));
}

namespace {

// The whole index file, or nullopt when there is none. Only a regular file is read, only when
// its size is the one its header gives (a damaged or sparse file claiming terabytes must not be
// allocated for), and only as many bytes as it had when opened: a symlink to /dev/zero or a FIFO
// left in ssd_dir must not hang the mount or fill its memory.
std::optional<std::string> read_index_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) spdlog::info("metadata index {} not usable: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  struct stat st;
  std::string data;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const char* why = "not a regular file";
  if (ok) {
    char header[sizeof(IndexHeader)];
    const ssize_t n = ::pread(fd, header, sizeof header, 0);
    ok = n == ssize_t(sizeof header) && index_file_size(std::string_view(header, sizeof header)) == uint64_t(st.st_size);
    why = "its size is not the one its header gives";
    // A header can be written to match any size: past half the machine's memory (an index is
    // about 100 bytes a file, so hundreds of millions of files) it is not read, a rescan is.
    if (ok && uint64_t(st.st_size) > physical_memory_bytes() / 2) {
      ok = false;
      why = "it is larger than half of this machine's memory";
    }
  }
  if (ok) {
    data.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < data.size()) {
      ssize_t n = ::read(fd, data.data() + got, data.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    data.resize(got);  // a file truncated meanwhile fails the checksum
  }
  ::close(fd);
  if (!ok) {
    spdlog::info("metadata index {} not usable: {}", path, why);
    return std::nullopt;
  }
  return data;
}

// Reads an index file and checks its integrity and owner; says nothing about freshness.
std::optional<StoredIndex> read_index(Source& source, const std::string& path) {
  try {
    std::optional<std::string> data = read_index_file(path);
    if (!data) return std::nullopt;
    return decode_index(*data, index_source_hash(source));
  } catch (const Error& e) {
    spdlog::info("metadata index {} not usable: {}", path, e.what());
    return std::nullopt;
  } catch (const std::bad_alloc&) {  // a rescan builds the tree in less memory than the file and its copy
    spdlog::warn("metadata index {} not usable: out of memory while reading it", path);
    return std::nullopt;
  }
}

}  // namespace

namespace {

// Whether every directory still has the fingerprint it had when the index was written.
bool still_fresh(const StoredIndex& stored, Source& source, const std::string& path) {
  if (::access(stale_marker(path).c_str(), F_OK) == 0) {
    spdlog::info("metadata index {} not reused: files changed under the last mount", path);
    return false;
  }
  if (stored.dirs.empty()) {
    spdlog::info("metadata index {} not reused: the source has no directory fingerprints", path);
    return false;
  }
  for (const DirRecord& r : stored.dirs) {
    auto fp = source.dir_fingerprint(stored.tree.path(r.node));
    if (!fp || !(*fp == r.fp)) {
      spdlog::info("metadata index {} not reused: {} changed", path, stored.tree.path(r.node));
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<Tree> load_tree(Source& source, const std::string& path) {
  std::optional<StoredIndex> stored = read_index(source, path);
  if (!stored || !still_fresh(*stored, source, path)) return std::nullopt;
  return std::move(stored->tree);
}

TreeLoad load_or_scan_tree(Source& source, const std::string& path, bool probe) {
  // Read once: a file that is refused is said so once in the log.
  std::optional<StoredIndex> previous = read_index(source, path);
  if (previous && still_fresh(*previous, source, path)) return TreeLoad{std::move(previous->tree), true, true};
  TreeLoad out{Tree::scan(source), false, previous.has_value()};
  // The previous index, stale as it may be, still knows the headers of files that kept their
  // version: only new or changed files are probed again (one read each, a round trip on S3).
  probe_images(out.tree, source, probe ? 16 : 0, previous ? &previous->tree : nullptr);
  try {
    save_tree(out.tree, source, path);
  } catch (const Error& e) {
    spdlog::warn("cannot persist the metadata index ({}); the next mount will rescan", e.what());
  }
  return out;
}

}  // namespace prepfs
