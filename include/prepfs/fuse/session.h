// The thin FUSE adaptor: one libfuse low-level session over a core Filesystem. It translates
// requests into Filesystem calls and results into replies; exceptions stop here and become errno
// (via prepfs::errno_of, the one map). It holds no file-system logic of its own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "prepfs/common/stats.h"
#include "prepfs/core/filesystem.h"

struct fuse_session;

namespace prepfs {

struct SessionConfig {
  std::string mountpoint;
  std::string fsname = "prepfs";   // first column of /proc/mounts
  unsigned max_threads = 64;       // libfuse 3.14 defaults to 10, which caps a slow source
  bool skip_open = false;          // let the kernel stop sending OPEN/RELEASE (files with no per-open state)
  bool allow_other = false;
  bool debug = false;
  bool read_only = true;           // false only for the control session (its writable command files)
  bool exit_on_unmount = false;    // unmounted from outside (umount -R): SIGTERM the daemon
  double negative_timeout = 0;     // how long the kernel may remember that a name does not exist
  ReplyCounters* reply_counters = nullptr;  // read replies are timed into it (owned by the mount)
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

  // Asks the kernel to drop cached pages and attributes of ino; asynchronous, since a request
  // handler must not block on the kernel's invalidation of its own inode.
  void invalidate(uint64_t ino);

  // Used by the request handlers (C callbacks); not for other callers.
  Filesystem& fs() { return fs_; }
  const SessionConfig& config() const { return cfg_; }

 private:
  void notify_loop();

  Filesystem& fs_;
  SessionConfig cfg_;
  fuse_session* se_ = nullptr;
  bool mounted_ = false;
  unsigned conn_id_ = 0;  // /sys/fs/fuse/connections/<id>, to abort a connection that will not die
  std::thread loop_;
  std::atomic<bool> stopping_{false};  // set by stop(); otherwise an ended loop means umount(8)

  std::mutex notify_mu_;
  std::condition_variable notify_cv_;
  std::deque<uint64_t> notify_q_;
  bool notify_stop_ = false;
  std::thread notifier_;
};

}  // namespace prepfs
