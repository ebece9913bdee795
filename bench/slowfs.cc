// prepfs-slowfs: a read-only FUSE passthrough that behaves like a slow remote source.
//
// It mirrors SRC_DIR at MOUNTPOINT and adds, in user space, a configurable latency to metadata
// requests, opens and reads, plus one bandwidth cap shared by all reads. It counts what the
// kernel asked for, so a test can check how much a cache in front of it fetched:
//
//   getfattr -n user.slowfs.stats MOUNTPOINT      -> {"opens":N,"reads":N,...}
//   --access-log FILE                             -> a line per open ("open PATH") and per read
//                                                    ("read PATH OFFSET SIZE"), PATH under SRC_DIR
//   setfattr -n user.slowfs.reset -v 1 MOUNTPOINT -> counters back to zero
//
// Honesty of the counters is the point, so there are no caching shortcuts: no keep_cache, no
// no_open, no readdirplus. Every open, read and readdir reaches this daemon. Entry and attribute
// timeouts are 1 s, so repeated lookups and getattrs within that window are answered by the kernel.
//
// Inodes: a FUSE inode number is the address of an Inode object holding an O_PATH fd to the
// source object. Objects are shared by (st_dev, st_ino) and live while the kernel holds a lookup
// reference (nlookup > 0). One mutex guards the table and every nlookup; it is never held across
// I/O or a sleep.

#include <fuse_lowlevel.h>
#include <linux/fuse.h>  // INIT reply layout, for the PARALLEL_DIROPS fix-up

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

using Clock = std::chrono::steady_clock;

constexpr double kTimeoutSec = 1.0;
constexpr std::string_view kStatsXattr = "user.slowfs.stats";
constexpr std::string_view kResetXattr = "user.slowfs.reset";

struct Options {
  std::string src;
  std::string mountpoint;
  bool foreground = false;
  bool debug = false;
  bool allow_other = false;
  double open_latency_ms = 0;
  double read_latency_ms = 0;
  double meta_latency_ms = 0;
  double bandwidth_mbps = 0;  // MB/s with MB = 10^6 bytes; 0 = unlimited
  unsigned threads = 64;
  std::string access_log;  // append each open and read here
};

struct Counters {
  std::atomic<uint64_t> opens{0}, reads{0}, read_bytes{0}, lookups{0}, getattrs{0}, opendirs{0}, readdirs{0},
      readlinks{0};

  void reset() {
    for (auto* c : {&opens, &reads, &read_bytes, &lookups, &getattrs, &opendirs, &readdirs, &readlinks}) {
      c->store(0, std::memory_order_relaxed);
    }
  }

  std::string json() const {
    auto v = [](const std::atomic<uint64_t>& c) { return std::to_string(c.load(std::memory_order_relaxed)); };
    return "{\"opens\":" + v(opens) + ",\"reads\":" + v(reads) + ",\"read_bytes\":" + v(read_bytes) +
           ",\"lookups\":" + v(lookups) + ",\"getattrs\":" + v(getattrs) + ",\"opendirs\":" + v(opendirs) +
           ",\"readdirs\":" + v(readdirs) + ",\"readlinks\":" + v(readlinks) + "}";
  }
};

// One bandwidth cap shared by all threads. Each read reserves its transfer time on a common
// timeline: it starts when the link is free (or now, if idle) and occupies it for bytes/bw. The
// caller then sleeps until its reservation ends, so N concurrent readers share the cap exactly.
class BandwidthLimiter {
 public:
  explicit BandwidthLimiter(double bytes_per_sec) : bytes_per_sec_(bytes_per_sec) {}

  void consume(size_t bytes) {
    if (bytes_per_sec_ <= 0 || bytes == 0) return;
    const auto cost = static_cast<int64_t>(static_cast<double>(bytes) * 1e9 / bytes_per_sec_);
    const int64_t now = now_ns();
    int64_t cur = next_free_ns_.load(std::memory_order_relaxed);
    int64_t done = 0;
    do {
      done = std::max(now, cur) + cost;
    } while (!next_free_ns_.compare_exchange_weak(cur, done, std::memory_order_relaxed));
    std::this_thread::sleep_until(Clock::time_point(std::chrono::nanoseconds(done)));
  }

 private:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  }

  double bytes_per_sec_;
  std::atomic<int64_t> next_free_ns_{0};
};

struct Inode {
  int fd = -1;  // O_PATH | O_NOFOLLOW
  dev_t dev = 0;
  ino_t ino = 0;
  bool is_symlink = false;
  uint64_t nlookup = 0;  // guarded by SlowFs::mutex
};

struct DirHandle {
  std::mutex mutex;
  DIR* dp = nullptr;
  off_t offset = 0;
  dirent* pending = nullptr;  // read from dp but not yet sent (did not fit in the last reply)
};

struct SlowFs {
  explicit SlowFs(const Options& o) : opts(o), bandwidth(o.bandwidth_mbps * 1e6) {}

  Options opts;
  Inode root;
  std::mutex mutex;
  std::map<std::pair<dev_t, ino_t>, std::unique_ptr<Inode>> inodes;
  Counters counters;
  BandwidthLimiter bandwidth;
  bool kernel_has_parallel_dirops = false;  // set in init, before the INIT reply is written
  std::mutex access_log_mutex;
  FILE* access_log = nullptr;  // --access-log: what the cache asked for, in order
  std::atomic<bool> init_reply_sent{false};
};

SlowFs& fs_of(fuse_req_t req) { return *static_cast<SlowFs*>(fuse_req_userdata(req)); }

Inode& inode_of(fuse_req_t req, fuse_ino_t ino) {
  if (ino == FUSE_ROOT_ID) return fs_of(req).root;
  return *reinterpret_cast<Inode*>(ino);
}

void sleep_ms(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

// Path through which an O_PATH fd can be reopened for I/O or used with path-only syscalls.
std::string proc_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

int stat_fd(int fd, struct stat* st) {
  return fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno;
}

void forget_one(SlowFs& fs, fuse_ino_t ino, uint64_t n) {
  if (ino == FUSE_ROOT_ID) return;
  auto* inode = reinterpret_cast<Inode*>(ino);
  std::unique_ptr<Inode> dead;
  {
    std::lock_guard lock(fs.mutex);
    inode->nlookup -= std::min(n, inode->nlookup);
    if (inode->nlookup != 0) return;
    auto it = fs.inodes.find({inode->dev, inode->ino});
    dead = std::move(it->second);
    fs.inodes.erase(it);
  }
  close(dead->fd);
}

// ---- FUSE operations ----------------------------------------------------------------------

void op_init(void* userdata, fuse_conn_info* conn) {
  auto& fs = *static_cast<SlowFs*>(userdata);
  // The kernel sends page-cache reads as background requests, 12 in flight by default; raise
  // the limit so concurrent readers are not serialised in front of an artificially slow source.
  conn->max_background = std::max(16u, fs.opts.threads);
  conn->congestion_threshold = conn->max_background * 3 / 4;
  conn->want &= ~static_cast<unsigned>(FUSE_CAP_READDIRPLUS);
  fs.kernel_has_parallel_dirops = (conn->capable & FUSE_CAP_PARALLEL_DIROPS) != 0;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  auto& fs = fs_of(req);
  fs.counters.lookups.fetch_add(1, std::memory_order_relaxed);
  sleep_ms(fs.opts.meta_latency_ms);

  const int fd = openat(inode_of(req, parent).fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  fuse_entry_param e{};
  if (const int err = stat_fd(fd, &e.attr); err != 0) {
    close(fd);
    fuse_reply_err(req, err);
    return;
  }
  e.attr_timeout = kTimeoutSec;
  e.entry_timeout = kTimeoutSec;

  Inode* inode = nullptr;
  bool known = false;
  {
    std::lock_guard lock(fs.mutex);
    auto& slot = fs.inodes[{e.attr.st_dev, e.attr.st_ino}];
    known = slot != nullptr;
    if (!known) {
      slot = std::make_unique<Inode>();
      slot->fd = fd;
      slot->dev = e.attr.st_dev;
      slot->ino = e.attr.st_ino;
      slot->is_symlink = S_ISLNK(e.attr.st_mode);
    }
    ++slot->nlookup;
    inode = slot.get();
  }
  if (known) close(fd);  // keep the existing object's fd
  e.ino = reinterpret_cast<fuse_ino_t>(inode);
  if (fuse_reply_entry(req, &e) != 0) forget_one(fs, e.ino, 1);  // the kernel never saw it
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  forget_one(fs_of(req), ino, nlookup);
  fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) forget_one(fs_of(req), forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  auto& fs = fs_of(req);
  fs.counters.getattrs.fetch_add(1, std::memory_order_relaxed);
  sleep_ms(fs.opts.meta_latency_ms);
  struct stat st {};
  if (const int err = stat_fd(inode_of(req, ino).fd, &st); err != 0) {
    fuse_reply_err(req, err);
    return;
  }
  fuse_reply_attr(req, &st, kTimeoutSec);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  auto& fs = fs_of(req);
  fs.counters.readlinks.fetch_add(1, std::memory_order_relaxed);
  sleep_ms(fs.opts.meta_latency_ms);
  char buf[PATH_MAX + 1];
  const ssize_t n = readlinkat(inode_of(req, ino).fd, "", buf, sizeof(buf));
  if (n < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  if (static_cast<size_t>(n) >= sizeof(buf)) {
    fuse_reply_err(req, ENAMETOOLONG);
    return;
  }
  buf[n] = '\0';
  fuse_reply_readlink(req, buf);
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto& fs = fs_of(req);
  fs.counters.opendirs.fetch_add(1, std::memory_order_relaxed);
  sleep_ms(fs.opts.meta_latency_ms);
  const int fd = open(proc_path(inode_of(req, ino).fd).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  auto handle = std::make_unique<DirHandle>();
  handle->dp = fdopendir(fd);
  if (handle->dp == nullptr) {
    const int err = errno;
    close(fd);
    fuse_reply_err(req, err);
    return;
  }
  fi->fh = reinterpret_cast<uint64_t>(handle.get());
  fi->keep_cache = 0;
  fi->cache_readdir = 0;
  if (fuse_reply_open(req, fi) == 0) {
    handle.release();  // owned by the kernel's file handle until releasedir
  } else {
    closedir(handle->dp);
  }
}

void op_readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t offset, fuse_file_info* fi) {
  auto& fs = fs_of(req);
  fs.counters.readdirs.fetch_add(1, std::memory_order_relaxed);
  sleep_ms(fs.opts.meta_latency_ms);

  auto& d = *reinterpret_cast<DirHandle*>(fi->fh);
  std::vector<char> buf(size);
  size_t used = 0;
  int err = 0;
  {
    std::lock_guard lock(d.mutex);
    if (offset != d.offset) {
      seekdir(d.dp, offset);
      d.pending = nullptr;
      d.offset = offset;
    }
    for (;;) {
      if (d.pending == nullptr) {
        errno = 0;
        d.pending = readdir(d.dp);
        if (d.pending == nullptr) {
          err = errno;
          break;
        }
      }
      struct stat st {};
      st.st_ino = d.pending->d_ino;
      st.st_mode = static_cast<mode_t>(DTTOIF(d.pending->d_type));
      const off_t next = d.pending->d_off;
      const size_t len = fuse_add_direntry(req, buf.data() + used, size - used, d.pending->d_name, &st, next);
      if (len > size - used) break;  // does not fit: keep it pending for the next call
      used += len;
      d.pending = nullptr;
      d.offset = next;
    }
  }
  // Reply only once the handle is unlocked: as soon as the kernel has the reply, the directory
  // may be closed and RELEASEDIR, on another thread, may free `d` and its mutex.
  if (err != 0 && used == 0) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_buf(req, buf.data(), used);
  }
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  auto* d = reinterpret_cast<DirHandle*>(fi->fh);
  closedir(d->dp);
  delete d;
  fuse_reply_err(req, 0);
}

// One line of --access-log: what, the path of fd under SRC_DIR, and details.
void log_access(SlowFs& fs, int fd, const char* what, const std::string& details = "") {
  if (!fs.access_log) return;
  char target[4096];
  const ssize_t n = readlink(proc_path(fd).c_str(), target, sizeof target - 1);
  if (n <= 0) return;
  std::string_view path(target, static_cast<size_t>(n));
  if (path.starts_with(fs.opts.src)) path.remove_prefix(fs.opts.src.size());
  while (path.starts_with('/')) path.remove_prefix(1);
  std::lock_guard lock(fs.access_log_mutex);
  std::fprintf(fs.access_log, "%s %.*s%s\n", what, static_cast<int>(path.size()), path.data(), details.c_str());
  std::fflush(fs.access_log);
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC) != 0) {
    fuse_reply_err(req, EROFS);
    return;
  }
  auto& fs = fs_of(req);
  fs.counters.opens.fetch_add(1, std::memory_order_relaxed);
  sleep_ms(fs.opts.open_latency_ms);
  const int fd = open(proc_path(inode_of(req, ino).fd).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  log_access(fs, fd, "open");
  fi->fh = static_cast<uint64_t>(fd);
  fi->direct_io = 0;
  fi->keep_cache = 0;  // the kernel drops this file's page cache on open: reads come here
  if (fuse_reply_open(req, fi) != 0) close(fd);
}

void op_read(fuse_req_t req, fuse_ino_t, size_t size, off_t offset, fuse_file_info* fi) {
  auto& fs = fs_of(req);
  fs.counters.reads.fetch_add(1, std::memory_order_relaxed);
  sleep_ms(fs.opts.read_latency_ms);
  if (fs.access_log)
    log_access(fs, static_cast<int>(fi->fh), "read", " " + std::to_string(offset) + " " + std::to_string(size));

  thread_local std::vector<char> buf;
  if (buf.size() < size) buf.resize(size);
  const ssize_t n = pread(static_cast<int>(fi->fh), buf.data(), size, offset);
  if (n < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  fs.counters.read_bytes.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  fs.bandwidth.consume(static_cast<size_t>(n));
  fuse_reply_buf(req, buf.data(), static_cast<size_t>(n));
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  close(static_cast<int>(fi->fh));
  fuse_reply_err(req, 0);
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs sv {};
  if (fstatvfs(fs_of(req).root.fd, &sv) != 0) {
    fuse_reply_err(req, errno);
    return;
  }
  fuse_reply_statfs(req, &sv);
}

// Replies to a getxattr/listxattr-style request with `len` bytes of `data` (size 0 = probe).
void reply_xattr_data(fuse_req_t req, const char* data, size_t len, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, len);
  } else if (size < len) {
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, data, len);
  }
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  auto& fs = fs_of(req);
  if (ino == FUSE_ROOT_ID && name == kStatsXattr) {
    std::string json;
    try {
      json = fs.counters.json();
    } catch (...) {
      fuse_reply_err(req, ENOMEM);
      return;
    }
    reply_xattr_data(req, json.data(), json.size(), size);
    return;
  }
  // Real xattrs pass through. Symlinks cannot be reached through /proc/self/fd without following.
  const Inode& inode = inode_of(req, ino);
  if (inode.is_symlink) {
    fuse_reply_err(req, ENODATA);
    return;
  }
  std::vector<char> buf(size);
  const ssize_t n = getxattr(proc_path(inode.fd).c_str(), name, buf.data(), size);
  if (n < 0) {
    fuse_reply_err(req, errno);
  } else if (size == 0) {
    fuse_reply_xattr(req, static_cast<size_t>(n));
  } else {
    fuse_reply_buf(req, buf.data(), static_cast<size_t>(n));
  }
}

// Lists only the source's own xattrs: the virtual user.slowfs.* names are never listed.
void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  const Inode& inode = inode_of(req, ino);
  if (inode.is_symlink) {
    reply_xattr_data(req, nullptr, 0, size);
    return;
  }
  std::vector<char> buf(size);
  const ssize_t n = listxattr(proc_path(inode.fd).c_str(), buf.data(), size);
  if (n < 0) {
    fuse_reply_err(req, errno);
  } else if (size == 0) {
    fuse_reply_xattr(req, static_cast<size_t>(n));
  } else {
    fuse_reply_buf(req, buf.data(), static_cast<size_t>(n));
  }
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char*, size_t, int) {
  if (ino == FUSE_ROOT_ID && name == kResetXattr) {
    fs_of(req).counters.reset();
    fuse_reply_err(req, 0);
    return;
  }
  fuse_reply_err(req, EROFS);
}

// ---- every mutation is refused ------------------------------------------------------------

void op_setattr(fuse_req_t req, fuse_ino_t, struct stat*, int, fuse_file_info*) { fuse_reply_err(req, EROFS); }
void op_mknod(fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) { fuse_reply_err(req, EROFS); }
void op_mkdir(fuse_req_t req, fuse_ino_t, const char*, mode_t) { fuse_reply_err(req, EROFS); }
void op_unlink(fuse_req_t req, fuse_ino_t, const char*) { fuse_reply_err(req, EROFS); }
void op_rmdir(fuse_req_t req, fuse_ino_t, const char*) { fuse_reply_err(req, EROFS); }
void op_symlink(fuse_req_t req, const char*, fuse_ino_t, const char*) { fuse_reply_err(req, EROFS); }
void op_rename(fuse_req_t req, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned) {
  fuse_reply_err(req, EROFS);
}
void op_link(fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { fuse_reply_err(req, EROFS); }
void op_create(fuse_req_t req, fuse_ino_t, const char*, mode_t, fuse_file_info*) { fuse_reply_err(req, EROFS); }
void op_write(fuse_req_t req, fuse_ino_t, const char*, size_t, off_t, fuse_file_info*) { fuse_reply_err(req, EROFS); }
void op_removexattr(fuse_req_t req, fuse_ino_t, const char*) { fuse_reply_err(req, EROFS); }
void op_fallocate(fuse_req_t req, fuse_ino_t, int, off_t, off_t, fuse_file_info*) { fuse_reply_err(req, EROFS); }
void op_copy_file_range(fuse_req_t req, fuse_ino_t, off_t, fuse_file_info*, fuse_ino_t, off_t, fuse_file_info*, size_t,
                        int) {
  fuse_reply_err(req, EROFS);
}

fuse_lowlevel_ops make_ops() {
  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.forget = op_forget;
  ops.forget_multi = op_forget_multi;
  ops.getattr = op_getattr;
  ops.readlink = op_readlink;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.releasedir = op_releasedir;
  ops.open = op_open;
  ops.read = op_read;
  ops.release = op_release;
  ops.statfs = op_statfs;
  ops.getxattr = op_getxattr;
  ops.listxattr = op_listxattr;
  ops.setxattr = op_setxattr;
  ops.setattr = op_setattr;
  ops.mknod = op_mknod;
  ops.mkdir = op_mkdir;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.symlink = op_symlink;
  ops.rename = op_rename;
  ops.link = op_link;
  ops.create = op_create;
  ops.write = op_write;
  ops.removexattr = op_removexattr;
  ops.fallocate = op_fallocate;
  ops.copy_file_range = op_copy_file_range;
  return ops;
}

// ---- session I/O ---------------------------------------------------------------------------
// libfuse 3.14 accepts FUSE_CAP_PARALLEL_DIROPS in conn->want (it is even on by default) but never
// copies it into the INIT reply (later releases fixed this). Without it the kernel serialises all
// lookups and readdirs within one directory, so with --meta-latency-ms a flat class directory would
// allow only one lookup per latency period, whatever the thread count. We therefore write the
// session's messages ourselves (fuse_session_custom_io on the mounted fd) and set the flag in the
// INIT reply, which is always the first message written on a new session.

ssize_t io_writev(int fd, struct iovec* iov, int count, void* userdata) {
  auto& fs = *static_cast<SlowFs*>(userdata);
  if (!fs.init_reply_sent.exchange(true) && fs.kernel_has_parallel_dirops && count >= 2 &&
      iov[0].iov_len == sizeof(fuse_out_header) &&
      iov[1].iov_len >= offsetof(fuse_init_out, flags) + sizeof(uint32_t)) {
    const auto* header = static_cast<const fuse_out_header*>(iov[0].iov_base);
    if (header->error == 0) static_cast<fuse_init_out*>(iov[1].iov_base)->flags |= FUSE_PARALLEL_DIROPS;
  }
  return writev(fd, iov, count);
}

ssize_t io_read(int fd, void* buf, size_t len, void*) { return read(fd, buf, len); }

// Mounts, serves until unmounted or signalled, unmounts. Returns the process exit code.
int serve(SlowFs& fs) {
  std::vector<std::string> arg_strings = {"prepfs-slowfs", "-o", "fsname=slowfs,subtype=slowfs,default_permissions"};
  if (fs.opts.allow_other) arg_strings[2] += ",allow_other";
  if (fs.opts.debug) arg_strings.emplace_back("-d");
  std::vector<char*> argv;
  for (auto& s : arg_strings) argv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  const fuse_lowlevel_ops ops = make_ops();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), &fs);
  if (se == nullptr) return 1;
  int rc = 1;
  if (fuse_set_signal_handlers(se) == 0) {
    if (fuse_session_mount(se, fs.opts.mountpoint.c_str()) == 0) {
      fuse_custom_io io{};
      io.writev = io_writev;
      io.read = io_read;
      if (fuse_session_custom_io(se, &io, fuse_session_fd(se)) != 0) {
        std::fprintf(stderr, "prepfs-slowfs: fuse_session_custom_io failed\n");
      }
      // Daemonize only after mounting, so the parent exits once the mount is usable.
      fuse_daemonize(fs.opts.foreground ? 1 : 0);
      fuse_loop_config* cfg = fuse_loop_cfg_create();
      // libfuse defaults to 10 threads; with sleeping handlers that would cap concurrency.
      fuse_loop_cfg_set_max_threads(cfg, fs.opts.threads);
      // Returns 0 on unmount, the signal number after SIGTERM/SIGINT/SIGHUP, -errno on failure.
      rc = fuse_session_loop_mt(se, cfg) < 0 ? 1 : 0;
      fuse_loop_cfg_destroy(cfg);
      fuse_session_unmount(se);
    }
    fuse_remove_signal_handlers(se);
  }
  fuse_session_destroy(se);
  fuse_opt_free_args(&args);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  CLI::App app{
      "prepfs-slowfs: read-only FUSE passthrough simulating a slow remote source.\n"
      "Counters: getfattr -n user.slowfs.stats MOUNTPOINT; "
      "reset: setfattr -n user.slowfs.reset -v 1 MOUNTPOINT"};
  app.add_option("SRC_DIR", opts.src, "Directory to mirror")->required()->check(CLI::ExistingDirectory);
  app.add_option("MOUNTPOINT", opts.mountpoint, "Where to mount")->required()->check(CLI::ExistingDirectory);
  app.add_flag("-f,--foreground", opts.foreground, "Stay in the foreground");
  app.add_flag("-d,--debug", opts.debug, "libfuse debug output (implies -f)");
  app.add_flag("--allow-other", opts.allow_other, "Mount with -o allow_other");
  app.add_option("--open-latency-ms", opts.open_latency_ms, "Added to every open")->check(CLI::NonNegativeNumber);
  app.add_option("--read-latency-ms", opts.read_latency_ms, "Added to every read request")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--meta-latency-ms", opts.meta_latency_ms, "Added to lookup/getattr/readlink/opendir/readdir")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--bandwidth-mbps", opts.bandwidth_mbps,
                 "Total read bandwidth cap in MB/s (10^6 bytes/s), shared by all threads; 0 = none")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", opts.threads, "Maximum FUSE worker threads")->check(CLI::Range(1u, 100000u));
  app.add_option("--access-log", opts.access_log,
                 "Append a line per open (\"open PATH\") and read (\"read PATH OFFSET SIZE\") to FILE");
  CLI11_PARSE(app, argc, argv);
  if (opts.debug) opts.foreground = true;
  // fuse_daemonize() changes to "/", and unmounting happens after that: keep an absolute path.
  char* abs_mountpoint = realpath(opts.mountpoint.c_str(), nullptr);
  if (abs_mountpoint == nullptr) {
    std::fprintf(stderr, "prepfs-slowfs: %s: %s\n", opts.mountpoint.c_str(), std::strerror(errno));
    return 1;
  }
  opts.mountpoint = abs_mountpoint;
  free(abs_mountpoint);

  {
    // SRC_DIR as the kernel names it, for the open log's relative paths.
    char* abs_src = realpath(opts.src.c_str(), nullptr);
    if (abs_src) opts.src = abs_src;
    free(abs_src);
  }
  SlowFs fs(opts);
  if (!opts.access_log.empty() && !(fs.access_log = std::fopen(opts.access_log.c_str(), "a"))) {
    std::fprintf(stderr, "prepfs-slowfs: %s: %s\n", opts.access_log.c_str(), std::strerror(errno));
    return 1;
  }
  fs.root.fd = open(opts.src.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fs.root.fd < 0) {
    std::fprintf(stderr, "prepfs-slowfs: cannot open %s: %s\n", opts.src.c_str(), std::strerror(errno));
    return 1;
  }
  fs.root.nlookup = 1;  // the root is never forgotten
  const int rc = serve(fs);
  // Whatever the kernel did not forget before unmount is released here.
  {
    std::lock_guard lock(fs.mutex);
    for (auto& [id, inode] : fs.inodes) close(inode->fd);
    fs.inodes.clear();
  }
  close(fs.root.fd);
  return rc;
}
