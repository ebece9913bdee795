#include "prepfs/fuse/session.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/common/mountinfo.h"
#include "prepfs/fuse/ops.h"

namespace prepfs {
namespace {

// A mount's device; its FUSE connection number is the minor. The last entry for a mount point
// is the one on top. From the mount table, not stat() of the mount: nothing answers on it before
// the loop starts. {0, 0}: not found.
std::pair<unsigned, unsigned> device_of(const std::string& mountpoint) {
  std::pair<unsigned, unsigned> dev{0, 0};
  for (const MountEntry& m : read_mountinfo())
    if (m.mount_point == mountpoint) dev = {m.major, m.minor};
  return dev;
}

// The connection abort switch lives in fusectl, which is not always mounted.
void ensure_fusectl() {
  if (access(kFusectlRoot, F_OK) != 0) return;
  struct stat a, b;
  if (::stat(kFusectlRoot, &a) == 0 && ::stat("/sys/fs/fuse", &b) == 0 && a.st_dev == b.st_dev)
    ::mount("fusectl", kFusectlRoot, "fusectl", 0, nullptr);
}

std::string escape_option(std::string s) {
  for (char& c : s)
    if (c == ',' || c == '\\') c = '_';
  return s;
}

}  // namespace

FuseSession::FuseSession(Filesystem& fs, SessionConfig cfg) : fs_(fs), cfg_(std::move(cfg)) {}

void FuseSession::kernel_capable(unsigned capable) {
  skip_open_ = cfg_.skip_open && (capable & FUSE_CAP_NO_OPEN_SUPPORT);
  skip_opendir_ = cfg_.skip_open && (capable & FUSE_CAP_NO_OPENDIR_SUPPORT);
  if (cfg_.skip_open && !(skip_open_ && skip_opendir_))
    spdlog::info("{}: the kernel lacks no-open support; every open is a round trip", cfg_.mountpoint);
}

FuseSession::~FuseSession() {
  stop();
  if (se_) fuse_session_destroy(se_);
}

void FuseSession::mount() {
  std::string opts = std::string(cfg_.read_only ? "ro" : "rw") +
                     ",default_permissions,subtype=prepfs,fsname=" + escape_option(cfg_.fsname) +
                     ",max_read=" + std::to_string(kMaxTransfer);
  if (cfg_.allow_other) opts += ",allow_other";
  std::vector<std::string> argv_s = {"prepfs", "-o", opts};
  if (cfg_.debug) argv_s.push_back("-d");
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  se_ = fuse_session_new(&args, &fuse_ops(), sizeof(fuse_lowlevel_ops), this);
  fuse_opt_free_args(&args);
  if (!se_) throw Error(EINVAL, "cannot create a FUSE session (see the messages above)");
  if (fuse_session_mount(se_, cfg_.mountpoint.c_str()) != 0)
    throw Error(EIO,
                "cannot mount " + cfg_.mountpoint + " (is /dev/fuse available, and are you root or in group fuse?)");
  mounted_ = true;
  // Mounted now, not at stop: otherwise the grace period in stop() would watch a directory that
  // does not exist yet, end at once, and abort a connection that was about to close by itself.
  ensure_fusectl();
  std::tie(dev_major_, dev_minor_) = device_of(cfg_.mountpoint);
  if (dev_minor_) connection_ = FuseConnection::hold(dev_minor_);
  if (cfg_.invalidations) notifier_ = std::thread([this] { notify_loop(); });
}

void FuseSession::start() {
  loop_ = std::thread([this] {
    fuse_loop_config* lc = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(lc, cfg_.max_threads);
    fuse_loop_cfg_set_idle_threads(lc, std::min(cfg_.max_threads, 16u));
    int rc = fuse_session_loop_mt(se_, lc);
    fuse_loop_cfg_destroy(lc);
    if (rc != 0 && !fuse_session_exited(se_)) spdlog::warn("FUSE loop for {} ended: {}", cfg_.mountpoint, rc);
    if (!stopping_ && cfg_.exit_on_unmount) {
      // Unmounted from outside (umount -R MNT, fusermount3 -u, fstab at shutdown): the daemon
      // stops as it does on SIGTERM, so nothing lingers without a mount.
      spdlog::info("{} was unmounted; stopping", cfg_.mountpoint);
      ::kill(::getpid(), SIGTERM);
    }
  });
}

void FuseSession::apply_read_ahead() {
  if (cfg_.read_ahead_kb == 0 || dev_minor_ == 0) return;
  const std::string file =
      "/sys/class/bdi/" + std::to_string(dev_major_) + ":" + std::to_string(dev_minor_) + "/read_ahead_kb";
  const std::string value = std::to_string(cfg_.read_ahead_kb);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::write(fd, value.data(), value.size()) == ssize_t(value.size());
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok)
    spdlog::info("{}: cannot set the read-ahead to {}K ({}: {}); the kernel's default stays", cfg_.mountpoint,
                 cfg_.read_ahead_kb, file, std::strerror(err));
}

void FuseSession::stop() {
  if (notifier_.joinable()) {
    notify_stop_ = true;
    notifier_.join();
  }
  stopping_ = true;
  if (!se_ || !mounted_) return;
  fuse_session_exit(se_);
  fuse_session_unmount(se_);  // lazy: the connection ends once the last user lets go
  mounted_ = false;
  if (!loop_.joinable()) return;
  // Workers leave their read() once the kernel ends the connection. If a user still holds a
  // file open, the connection would outlive us: abort it after a grace period. Through the
  // connection held since the mount: by now its number may be another mount's.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (connection_.alive() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (connection_.alive()) {
    connection_.abort();
    spdlog::warn("{} was still in use; aborted its FUSE connection", cfg_.mountpoint);
  }
  loop_.join();
}

// Tells the kernel to drop what the core invalidated (a changed source file's pages and
// attributes). On its own thread: a request handler must not block on the kernel's invalidation
// of its own inode.
void FuseSession::notify_loop() {
  while (!notify_stop_.load()) {
    for (uint64_t ino : cfg_.invalidations->wait(std::chrono::milliseconds(100))) {
      int rc = fuse_lowlevel_notify_inval_inode(se_, ino, 0, 0);
      if (rc != 0 && rc != -ENOENT) spdlog::debug("invalidate inode {}: {}", ino, std::strerror(-rc));
    }
  }
}

}  // namespace prepfs
