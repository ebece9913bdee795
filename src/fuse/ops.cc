// The op table: each libfuse low-level request becomes one Filesystem call, and its result or
// exception one reply. This is the only place where the core's errors become errno (through the
// one map, errno_map.cc) and where exceptions stop.
#include "prepfs/fuse/ops.h"

#include <fuse_lowlevel.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <cerrno>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/fuse/errno_map.h"
#include "prepfs/fuse/session.h"

namespace prepfs {
namespace {

FuseSession& session_of(fuse_req_t req) { return *static_cast<FuseSession*>(fuse_req_userdata(req)); }
Filesystem& fs_of(fuse_req_t req) { return session_of(req).fs(); }

// Runs one handler; any exception becomes an error reply. This is the only place where the
// core's errors cross into FUSE.
template <class F>
void guarded(fuse_req_t req, const char* op, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    int err = errno_of(e);
    if (err != ENOENT) spdlog::debug("{}: {}", op, e.what());
    fuse_reply_err(req, err);
  }
}

// The mounting user owns what has no owner of its own (the mount's directories, control files).
struct stat to_stat(fuse_req_t req, const Attr& a) {
  const SessionConfig& cfg = session_of(req).config();
  struct stat st {};
  st.st_ino = a.ino;
  st.st_uid = a.uid == Attr::kMountingUser ? cfg.uid : a.uid;
  st.st_gid = a.gid == Attr::kMountingUser ? cfg.gid : a.gid;
  st.st_mode = a.mode;
  st.st_nlink = a.nlink;
  st.st_size = static_cast<off_t>(a.size);
  st.st_blksize = 4096;
  st.st_blocks = static_cast<blkcnt_t>((a.size + 511) / 512);
  // Floored: a time before 1970 has a negative second and a nanosecond part in [0, 1e9).
  const int64_t ns = a.mtime_ns % 1'000'000'000 < 0 ? a.mtime_ns % 1'000'000'000 + 1'000'000'000
                                                    : a.mtime_ns % 1'000'000'000;
  st.st_mtim.tv_sec = (a.mtime_ns - ns) / 1'000'000'000;
  st.st_mtim.tv_nsec = ns;
  st.st_atim = st.st_mtim;
  st.st_ctim = st.st_mtim;
  return st;
}

fuse_entry_param to_entry(fuse_req_t req, const Attr& a) {
  fuse_entry_param e{};
  e.ino = a.ino;
  e.generation = 1;
  e.attr = to_stat(req, a);
  e.attr_timeout = a.timeout;
  e.entry_timeout = a.timeout;
  return e;
}

void op_init(void* userdata, fuse_conn_info* conn) {
  auto* self = static_cast<FuseSession*>(userdata);
  conn->max_write = kMaxTransfer;
  conn->max_read = kMaxTransfer;  // must equal the max_read mount option
  conn->time_gran = 1;
  // Readahead and async reads are "background" requests, which the kernel caps at 12 in flight
  // by default: with a slow source that, not the worker threads, would bound concurrency.
  conn->max_background = static_cast<unsigned>(std::min(self->config().max_threads, 65535u));
  conn->congestion_threshold = conn->max_background * 3 / 4;
  // The tree only changes through explicit revalidation, which invalidates explicitly; asking
  // the kernel to check mtimes on every read would add a GETATTR round trip per read.
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  self->kernel_capable(conn->capable);
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  try {
    fuse_entry_param e = to_entry(req, fs_of(req).lookup(parent, name));
    fuse_reply_entry(req, &e);
  } catch (const std::exception& ex) {
    int err = errno_of(ex);
    double neg = session_of(req).config().negative_timeout;
    if (err == ENOENT && neg > 0) {  // remember the miss: loaders probe for names that do not exist
      fuse_entry_param e{};
      e.entry_timeout = neg;
      fuse_reply_entry(req, &e);
      return;
    }
    fuse_reply_err(req, err);
  }
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  guarded(req, "getattr", [&] {
    Attr a = fs_of(req).getattr(ino);
    struct stat st = to_stat(req, a);
    fuse_reply_attr(req, &st, a.timeout);
  });
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  guarded(req, "readlink", [&] { fuse_reply_readlink(req, fs_of(req).readlink(ino).c_str()); });
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, "open", [&] {
    OpenReply r = fs_of(req).open(ino, fi->flags, fuse_req_ctx(req)->uid);
    if (!r.needs_open && session_of(req).skips_open()) {
      // ENOSYS tells the kernel to stop sending OPEN and RELEASE on this connection and to keep
      // the page cache: a warm small-file read then never leaves the kernel.
      fuse_reply_err(req, ENOSYS);
      return;
    }
    fi->fh = r.fh;
    fi->keep_cache = r.keep_cache;
    fi->direct_io = r.direct_io;
    if (fuse_reply_open(req, fi) == 0) return;
    // The kernel never got the handle (the open was interrupted, the connection is gone), so no
    // RELEASE will come for it: what it holds (a variant, a snapshot's budget) goes now. After
    // the reply, nothing may throw into guarded(), which would reply a second time.
    try {
      fs_of(req).release(ino, r.fh);
    } catch (const std::exception& e) {
      spdlog::debug("release of an open the kernel never saw: {}", e.what());
    }
  });
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  guarded(req, "read", [&] {
    std::vector<Slice> slices = fs_of(req).read(ino, fi ? fi->fh : 0, static_cast<uint64_t>(off), size);
    std::vector<iovec> iov;
    iov.reserve(slices.size());
    size_t bytes = 0;
    for (const Slice& s : slices) {
      iov.push_back(iovec{const_cast<char*>(s.data), s.len});
      bytes += s.len;
    }
    ReplyCounters* rc = session_of(req).config().reply_counters;
    uint64_t t0 = rc ? steady_ns() : 0;
    if (iov.empty())
      fuse_reply_buf(req, nullptr, 0);
    else
      fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
    if (rc) {  // the copy into the reader's buffer happens inside the reply call
      bump(rc->bytes, bytes);
      bump(rc->ns, steady_ns() - t0);
    }
  });
}

void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, "release", [&] {
    fs_of(req).release(ino, fi->fh);
    fuse_reply_err(req, 0);
  });
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  guarded(req, "opendir", [&] {
    Attr a = fs_of(req).getattr(ino);
    if (!S_ISDIR(a.mode)) throw Error(ENOTDIR, "not a directory");
    if (session_of(req).skips_opendir()) {
      fuse_reply_err(req, ENOSYS);  // as for OPEN: no per-handle state, skip the round trips
      return;
    }
    fi->fh = 0;
    fuse_reply_open(req, fi);
  });
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  guarded(req, "readdir", [&] {
    std::vector<char> buf(size);
    size_t used = 0;
    fs_of(req).readdir(ino, static_cast<uint64_t>(off), [&](std::string_view name, const Attr& a, uint64_t next) {
      std::string n(name);
      size_t need;
      if (plus) {
        fuse_entry_param e = to_entry(req, a);
        if (n == "." || n == "..") e = fuse_entry_param{};  // not looked up: no inode reference
        if (n == "." || n == "..") e.attr = to_stat(req, a);
        need = fuse_add_direntry_plus(req, buf.data() + used, size - used, n.c_str(), &e, static_cast<off_t>(next));
      } else {
        struct stat st = to_stat(req, a);
        need = fuse_add_direntry(req, buf.data() + used, size - used, n.c_str(), &st, static_cast<off_t>(next));
      }
      if (need > size - used) return false;
      used += need;
      return true;
    });
    fuse_reply_buf(req, buf.data(), used);
  });
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  readdir_common(req, ino, size, off, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  readdir_common(req, ino, size, off, true);
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  guarded(req, "statfs", [&] {
    FsStat s = fs_of(req).statfs();
    struct statvfs v {};
    v.f_bsize = s.bsize;
    v.f_frsize = s.bsize;
    v.f_blocks = s.blocks;
    v.f_files = s.files;
    v.f_namemax = s.namemax;
    fuse_reply_statfs(req, &v);
  });
}

// The tree is read-only; the mount is "ro" too, so the kernel normally answers these itself.
// The one exception is the control session, mounted "rw" for its writable command files
// (the Filesystem decides which; everything else answers EROFS).
void erofs(fuse_req_t req) { fuse_reply_err(req, EROFS); }

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* st, int to_set, fuse_file_info*) {
  // truncate(2) / O_TRUNC on a command file: accepted (timestamps that come with it are ignored).
  constexpr int kTimes = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW |
                         FUSE_SET_ATTR_CTIME;
  if (!(to_set & FUSE_SET_ATTR_SIZE) || (to_set & ~(FUSE_SET_ATTR_SIZE | kTimes))) return erofs(req);
  guarded(req, "setattr", [&] {
    Attr a = fs_of(req).truncate(ino, static_cast<uint64_t>(st->st_size));
    struct stat out = to_stat(req, a);
    fuse_reply_attr(req, &out, a.timeout);
  });
}
void op_mknod(fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) { erofs(req); }
void op_mkdir(fuse_req_t req, fuse_ino_t, const char*, mode_t) { erofs(req); }
void op_unlink(fuse_req_t req, fuse_ino_t, const char*) { erofs(req); }
void op_rmdir(fuse_req_t req, fuse_ino_t, const char*) { erofs(req); }
void op_symlink(fuse_req_t req, const char*, fuse_ino_t, const char*) { erofs(req); }
void op_rename(fuse_req_t req, fuse_ino_t, const char*, fuse_ino_t, const char*, unsigned) { erofs(req); }
void op_link(fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) { erofs(req); }
void op_create(fuse_req_t req, fuse_ino_t, const char*, mode_t, fuse_file_info*) { erofs(req); }
void op_write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  guarded(req, "write", [&] {
    fuse_reply_write(req, fs_of(req).write(ino, fi->fh, static_cast<uint64_t>(off), std::string_view(buf, size)));
  });
}
// No file here is a device: ENOTTY is what ioctl(2) answers for a command a file does not know.
// (Left unset, libfuse answers ENOSYS, which the kernel hands to the caller as is and does not
// remember: Python's isatty() on every open, lsattr, ... would see "Function not implemented".)
void op_ioctl(fuse_req_t req, fuse_ino_t, unsigned int, void*, fuse_file_info*, unsigned, const void*, size_t,
              size_t) {
  fuse_reply_err(req, ENOTTY);
}
void op_setxattr(fuse_req_t req, fuse_ino_t, const char*, const char*, size_t, int) { erofs(req); }
void op_removexattr(fuse_req_t req, fuse_ino_t, const char*) { erofs(req); }

const fuse_lowlevel_ops kOps = [] {
  fuse_lowlevel_ops o{};
  o.init = op_init;
  o.lookup = op_lookup;
  o.getattr = op_getattr;
  o.readlink = op_readlink;
  o.open = op_open;
  o.read = op_read;
  o.release = op_release;
  o.opendir = op_opendir;
  o.readdir = op_readdir;
  o.readdirplus = op_readdirplus;
  o.releasedir = op_releasedir;
  o.statfs = op_statfs;
  o.setattr = op_setattr;
  o.mknod = op_mknod;
  o.mkdir = op_mkdir;
  o.unlink = op_unlink;
  o.rmdir = op_rmdir;
  o.symlink = op_symlink;
  o.rename = op_rename;
  o.link = op_link;
  o.create = op_create;
  o.write = op_write;
  o.ioctl = op_ioctl;
  o.setxattr = op_setxattr;
  o.removexattr = op_removexattr;
  return o;
}();

}  // namespace

const fuse_lowlevel_ops& fuse_ops() { return kOps; }

}  // namespace prepfs
