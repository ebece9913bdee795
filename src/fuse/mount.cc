#include "prepfs/fuse/mount.h"

#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <thread>

#include "prepfs/common/error.h"
#include "prepfs/common/mountinfo.h"
#include "prepfs/core/data_fs.h"
#include "prepfs/fuse/session.h"

namespace prepfs {

namespace {

// The absolute path of a mountpoint that cannot be stat'ed (a dead FUSE mount answers ENOTCONN
// to its own root): its parent resolved, and its last name as given.
std::string absolute_through_parent(const std::string& mnt) {
  std::string path = mnt;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  char resolved[PATH_MAX];
  if (name.empty() || name == "." || name == ".." || !realpath(parent.c_str(), resolved)) return "";
  const std::string dir = resolved;
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// Whether the mount at abs is a FUSE mount whose daemon is gone: its connection answers ENOTCONN.
// statfs always asks the daemon (a stat may be answered from the kernel's cached attributes long
// after the daemon died). A live daemon that does not answer within 2 s counts as alive (busy).
bool connection_is_dead(const std::string& abs) {
  auto answer = std::make_shared<std::promise<int>>();
  std::future<int> rc = answer->get_future();
  std::thread([abs, answer] {
    struct statvfs sv;
    answer->set_value(::statvfs(abs.c_str(), &sv) == 0 ? 0 : errno);
  }).detach();  // a hung daemon keeps the thread; the process goes on (and exits) without it
  return rc.wait_for(std::chrono::seconds(2)) == std::future_status::ready && rc.get() == ENOTCONN;
}

// 0 once a stat of path answers, else its errno: in a child process that holds none of our
// descriptors. The daemon must not wait on its own mount itself: a request the kernel has handed
// to our workers is waited for uninterruptibly, so were the daemon killed meanwhile (systemd
// giving up on a slow start, kill -9) that thread would wait for workers that are gone, and keep
// the process, its /dev/fuse descriptors and so the mount alive, stuck for good. The child holds
// no /dev/fuse descriptor: once the daemon is gone the connection ends and the child's stat fails.
int stat_answers_elsewhere(const std::string& path) {
  const pid_t pid = fork();
  if (pid < 0) return errno;
  if (pid == 0) {  // only async-signal-safe calls here: the parent has threads
    if (::close_range(3, ~0U, 0) != 0)
      for (int fd = 3; fd < 65536; fd++) ::close(fd);
    struct stat st;
    _exit(::stat(path.c_str(), &st) == 0 ? 0 : (errno > 0 && errno < 256 ? errno : EIO));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return errno;
  return WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
}

// The file system type mounted on top at abs ("" when nothing is).
std::string top_mount_type(const std::string& abs) {
  std::string top;
  for (const MountEntry& m : read_mountinfo())
    if (m.mount_point == abs) top = m.fstype;  // a later entry is mounted on top
  return top;
}

// A prepfs mount whose daemon died (a crash, SIGKILL, the OOM killer) answers ENOTCONN until
// someone unmounts it; a restart (systemd's Restart=on-failure) would fail on it every time. Ours
// (fuse.prepfs on top there) and dead, it is detached with the augmented/ and .prepfs/ mounts
// below it; true then. Any other mount there, dead or alive, is the user's to look at. Only root
// may detach (a user's mount is fusermount3's to undo): for others this fails, and says so.
bool detach_dead_prepfs_mount(const std::string& abs) {
  if (abs.empty() || top_mount_type(abs) != "fuse.prepfs" || !connection_is_dead(abs)) return false;
  if (::umount2(abs.c_str(), MNT_DETACH) != 0) {
    spdlog::warn("cannot detach the dead prepfs mount at {}: {}", abs, std::strerror(errno));
    return false;
  }
  spdlog::warn("detached a dead prepfs mount at {} (the daemon that served it had exited)", abs);
  return true;
}

std::string checked_mountpoint(const std::string& mnt, bool may_detach) {
  struct stat st, parent;
  if (::stat(mnt.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOTCONN && may_detach && detach_dead_prepfs_mount(absolute_through_parent(mnt)))
      return checked_mountpoint(mnt, false);
    if (err == ENOTCONN)  // a user's FUSE mount is theirs to unmount through fusermount3
      throw Error(ENOTCONN, "mountpoint " + mnt + " is a dead FUSE mount; run '" +
                                (geteuid() == 0 ? "umount -l " : "fusermount3 -uz ") + mnt + "' first");
    throw_errno(err, "mountpoint " + mnt);
  }
  if (!S_ISDIR(st.st_mode)) throw Error(ENOTDIR, "mountpoint " + mnt + " is not a directory");
  char resolved[PATH_MAX];
  if (!realpath(mnt.c_str(), resolved)) throw_errno(errno, "mountpoint " + mnt);
  const std::string abs = resolved;
  if (abs == "/") return abs;
  if (!top_mount_type(abs).empty()) {
    // The kernel may still answer a stat of a dead mount from cached attributes.
    if (may_detach && detach_dead_prepfs_mount(abs)) return checked_mountpoint(mnt, false);
    throw Error(EBUSY, "mountpoint " + mnt + " is busy: something is already mounted there");
  }
  if (::stat((abs + "/..").c_str(), &parent) == 0 && parent.st_dev != st.st_dev)
    throw Error(EBUSY, "mountpoint " + mnt + " is busy: something is already mounted there");
  return abs;
}

}  // namespace

std::string check_mountpoint(const std::string& mnt) { return checked_mountpoint(mnt, true); }

namespace {

class ThreeSessions final : public Mount {
 public:
  void start(Daemon& d, const Options& opts) {
    const std::string mountpoint = check_mountpoint(opts.mountpoint);
    SessionConfig main_cfg;
    main_cfg.mountpoint = mountpoint;
    main_cfg.fsname = opts.source;
    main_cfg.max_threads = opts.threads;
    main_cfg.skip_open = true;
    main_cfg.exit_on_unmount = true;  // umount -R MNT (fstab, mount(8)) stops the daemon
    main_cfg.allow_other = opts.allow_other;
    main_cfg.uid = geteuid();
    main_cfg.gid = getegid();
    main_cfg.debug = opts.debug_fuse;
    main_cfg.negative_timeout = opts.metadata_ttl < 0 ? 86400.0 : opts.metadata_ttl;
    main_cfg.reply_counters = &d.replies();
    main_cfg.read_ahead_kb = opts.read_ahead_bytes / 1024;
    SessionConfig aug_cfg = main_cfg;  // the augmented session's replies are samples too
    main_cfg.invalidations = &d.invalidations();
    main_ = std::make_unique<FuseSession>(d.main_fs(), main_cfg);

    aug_cfg.mountpoint = mountpoint + "/" + DataFs::kAugmentedDirName;
    aug_cfg.fsname = opts.source + ":augmented";
    aug_cfg.skip_open = false;  // every open picks the next variant
    aug_cfg.exit_on_unmount = false;
    aug_cfg.invalidations = &d.augmented_invalidations();
    augmented_ = std::make_unique<FuseSession>(d.augmented_fs(), aug_cfg);

    SessionConfig ctl_cfg = aug_cfg;
    ctl_cfg.mountpoint = mountpoint + "/" + DataFs::kControlDirName;
    ctl_cfg.fsname = "prepfs-control";
    // An open of samples, resident or importance waits for every header on a lazy first mount
    // (minutes): with 4 workers, four ranks building their samplers held them all, and stats,
    // plan and the other jobs' orders hung meanwhile. Idle workers cost little.
    ctl_cfg.max_threads = 32;
    ctl_cfg.reply_counters = nullptr;  // control files are not samples: no copy bandwidth from them
    ctl_cfg.invalidations = nullptr;   // augmented/'s queue is its own
    ctl_cfg.negative_timeout = 0;
    ctl_cfg.read_only = false;  // its command files (evict) take writes; the rest answers EROFS
    ctl_cfg.read_ahead_kb = 0;  // small files read whole
    control_ = std::make_unique<FuseSession>(d.control_fs(), ctl_cfg);

    main_->mount();
    main_->start();  // must answer before the nested mounts can look up their directories
    augmented_->mount();
    augmented_->start();
    control_->mount();
    control_->start();

    // Ready means answering: a request that travels through the kernel to our workers.
    if (const int err = stat_answers_elsewhere(ctl_cfg.mountpoint + "/stats"))
      throw_errno(err, "the new mount at " + mountpoint + " does not answer");
    // Both data sessions have answered (so taken INIT, which sets the read-ahead it agreed):
    // raise it now. 1M instead of 128K: fewer, larger READs of a decoded/ file (bench/read_ahead).
    if (stat_answers_elsewhere(aug_cfg.mountpoint) == 0) augmented_->apply_read_ahead();
    main_->apply_read_ahead();
  }

  void stop() override {
    if (control_) control_->stop();
    if (augmented_) augmented_->stop();
    if (main_) main_->stop();
  }

  ~ThreeSessions() override { stop(); }

 private:
  std::unique_ptr<FuseSession> main_, augmented_, control_;
};

}  // namespace

std::unique_ptr<Mount> Mount::start(Daemon& daemon, const Options& opts) {
  auto m = std::make_unique<ThreeSessions>();
  m->start(daemon, opts);  // on an exception the destructor unmounts whatever was mounted
  return m;
}

}  // namespace prepfs
