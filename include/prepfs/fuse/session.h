// One libfuse low-level session over a core Filesystem: its mount, its worker threads, and its
// end (a clean unmount, or an abort through fusectl when a user holds the connection). The op
// table that turns requests into Filesystem calls is ops.cc; this file is the lifecycle.
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "prepfs/common/stats.h"
#include "prepfs/core/filesystem.h"
#include "prepfs/core/invalidations.h"
#include "prepfs/fuse/fuse_connection.h"

struct fuse_session;

namespace prepfs {

// max_write decides max_pages, and so the largest read the kernel sends.
inline constexpr unsigned kMaxTransfer = 1u << 20;

struct SessionConfig {
  std::string mountpoint;
  std::string fsname = "prepfs";  // first column of /proc/mounts
  unsigned max_threads = 64;      // libfuse 3.14 defaults to 10, which caps a slow source
  bool skip_open = false;         // let the kernel stop sending OPEN/RELEASE (files with no per-open state)
  bool allow_other = false;
  bool debug = false;
  bool read_only = true;                    // false only for the control session (its writable command files)
  bool exit_on_unmount = false;             // unmounted from outside (umount -R): SIGTERM the daemon
  double negative_timeout = 0;              // how long the kernel may remember that a name does not exist
  ReplyCounters* reply_counters = nullptr;  // read replies are timed into it (owned by the daemon)
  Invalidations* invalidations = nullptr;   // inodes to drop from the kernel's caches (main tree)
  uint32_t uid = 0, gid = 0;                // the mounting user: owns entries without an owner
  uint64_t read_ahead_kb = 0;               // the mount's read-ahead (its bdi's read_ahead_kb); 0: the kernel's
};

class FuseSession {
 public:
  FuseSession(Filesystem& fs, SessionConfig cfg);
  ~FuseSession();
  FuseSession(const FuseSession&) = delete;
  FuseSession& operator=(const FuseSession&) = delete;

  void mount();  // throws Error with a clear message
  void start();  // serves requests on background threads
  void stop();   // unmounts and waits for the workers; safe to call twice
  // Sets the mount's read-ahead to cfg.read_ahead_kb. Only once the session has answered a
  // request: the kernel lowers it to what INIT agreed (128K) as it takes INIT's reply. Needs
  // root (sysfs); otherwise logged, and the kernel's default stays.
  void apply_read_ahead();

  // Used by the request handlers (C callbacks); not for other callers.
  Filesystem& fs() { return fs_; }
  const SessionConfig& config() const { return cfg_; }
  // At INIT, the kernel's capabilities (libfuse's FUSE_CAP_* bits). OPEN and OPENDIR are answered
  // ENOSYS (the kernel then stops sending them and their RELEASEs) only where the kernel supports
  // it: an older one hands ENOSYS to the caller, and every open would fail.
  void kernel_capable(unsigned capable);
  bool skips_open() const { return skip_open_.load(std::memory_order_relaxed); }
  bool skips_opendir() const { return skip_opendir_.load(std::memory_order_relaxed); }

 private:
  void notify_loop();

  Filesystem& fs_;
  SessionConfig cfg_;
  fuse_session* se_ = nullptr;
  bool mounted_ = false;
  FuseConnection connection_;  // to abort the connection a user still holds at stop
  unsigned dev_major_ = 0, dev_minor_ = 0;  // the mount's device: its bdi is /sys/class/bdi/MAJOR:MINOR
  std::thread loop_;
  std::atomic<bool> skip_open_{false}, skip_opendir_{false};  // set at INIT, before any other request
  std::atomic<bool> stopping_{false};  // set by stop(); otherwise an ended loop means umount(8)
  std::atomic<bool> notify_stop_{false};
  std::thread notifier_;
};

}  // namespace prepfs
