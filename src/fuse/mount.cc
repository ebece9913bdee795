#include "prepfs/fuse/mount.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "prepfs/common/error.h"
#include "prepfs/common/mountinfo.h"
#include "prepfs/core/data_fs.h"
#include "prepfs/fuse/session.h"

namespace prepfs {

std::string check_mountpoint(const std::string& mnt) {
  struct stat st, parent;
  if (::stat(mnt.c_str(), &st) != 0) {
    if (errno == ENOTCONN)
      throw Error(ENOTCONN, "mountpoint " + mnt + " is a dead FUSE mount; run 'umount " + mnt + "' first");
    throw_errno(errno, "mountpoint " + mnt);
  }
  if (!S_ISDIR(st.st_mode)) throw Error(ENOTDIR, "mountpoint " + mnt + " is not a directory");
  char resolved[PATH_MAX];
  if (!realpath(mnt.c_str(), resolved)) throw_errno(errno, "mountpoint " + mnt);
  const std::string abs = resolved;
  if (abs == "/") return abs;
  for (const MountEntry& m : read_mountinfo())
    if (m.mount_point == abs) throw Error(EBUSY, "mountpoint " + mnt + " is busy: something is already mounted there");
  if (::stat((abs + "/..").c_str(), &parent) == 0 && parent.st_dev != st.st_dev)
    throw Error(EBUSY, "mountpoint " + mnt + " is busy: something is already mounted there");
  return abs;
}

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
    ctl_cfg.max_threads = 4;
    ctl_cfg.reply_counters = nullptr;  // control files are not samples: no copy bandwidth from them
    ctl_cfg.invalidations = nullptr;   // augmented/'s queue is its own
    ctl_cfg.negative_timeout = 0;
    ctl_cfg.read_only = false;  // its command files (evict) take writes; the rest answers EROFS
    control_ = std::make_unique<FuseSession>(d.control_fs(), ctl_cfg);

    main_->mount();
    main_->start();  // must answer before the nested mounts can look up their directories
    augmented_->mount();
    augmented_->start();
    control_->mount();
    control_->start();

    // Ready means answering: a request that travels through the kernel to our workers.
    struct stat st;
    if (::stat((ctl_cfg.mountpoint + "/stats").c_str(), &st) != 0)
      throw_errno(errno, "the new mount at " + mountpoint + " does not answer");
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
