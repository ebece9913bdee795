// prepfs: mount a dataset directory or bucket with raw/, decoded/ and augmented/ views served
// from a RAM + SSD cache. This file parses the command line, daemonizes, builds the Daemon and
// its front doors (the FUSE mount, the optional metrics endpoint) and waits for a signal.
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "prepfs/common/error.h"
#include "prepfs/common/log.h"
#include "prepfs/common/options.h"
#include "prepfs/daemon/daemon.h"
#include "prepfs/fuse/mount.h"
#include "prepfs/fuse/sd_notify.h"
#include "prepfs/http/metrics_http.h"
#include "prepfs_config.h"

namespace {

std::string options_help() {
  std::string s =
      "\nOptions for -o (comma-separated key=value; also accepted in --config files; a BOOL key given bare "
      "means 1):\n";
  for (const auto& d : prepfs::option_docs()) {
    std::string left = std::string("  ") + d.key + (d.value[0] ? std::string("=") + d.value : "");
    if (left.size() < 26) left.resize(26, ' ');
    s += left + " " + d.help + "\n";
  }
  s += "\nExamples:\n"
       "  prepfs /data/imagenet /mnt/imagenet -o ram=4G,ssd=50G,ssd_dir=/var/cache/prepfs\n"
       "  prepfs /data/imagenet /mnt/imagenet --config /etc/prepfs/imagenet.conf -f\n"
       "Stop with SIGTERM or SIGINT (the mount is unmounted cleanly). See prepfs(8).\n";
  return s;
}

// The stop signals, blocked in every thread (so no worker is interrupted) and taken by one
// thread of their own from the start. While the daemon starts (a first scan of a large source
// can take minutes) nothing is mounted: a stop signal ends the process at once, saying so; they
// were left pending until the mount was up, so Ctrl-C did nothing and `systemctl stop` waited
// for its SIGKILL. From started() on, the signal is the main thread's, which unmounts cleanly.
// Every log line is the main thread's once it has started: it replaces the logger (syslog in
// the background), which a line from this thread meanwhile could use after it was freed.
class StopSignals {
 public:
  explicit StopSignals(const sigset_t& set) : set_(set) {
    std::thread([this] { watch(); }).detach();  // it lives as long as the process
  }
  // The mount is about to start: a stop signal from now on is waited for (wait()).
  void started() {
    std::lock_guard lock(mu_);
    started_ = true;
  }
  // The stop signal that came, once one has; SIGHUPs meanwhile are logged.
  int wait() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return sig_ != 0 || hups_ > 0; });
      if (sig_ != 0) return sig_;
      hups_ = 0;
      spdlog::info("SIGHUP: nothing to reload");
    }
  }

 private:
  void watch() {
    for (;;) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) continue;
      std::lock_guard lock(mu_);
      if (sig == SIGHUP) {
        if (!started_) spdlog::info("SIGHUP: nothing to reload");
        hups_ += started_;
        cv_.notify_all();
        continue;
      }
      if (!started_) {
        spdlog::error("{} while starting: stopped before anything was mounted", strsignal(sig));
        // Ended by the signal itself, as systemd expects of a stop (an exit status would mark
        // the unit failed, and Restart=on-failure would start it again after a plain kill).
        signal(sig, SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
        raise(sig);
        std::_Exit(128 + sig);  // not reached
      }
      sig_ = sig;
      cv_.notify_all();
      return;
    }
  }

  const sigset_t set_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  int sig_ = 0;
  unsigned hups_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  prepfs::Options opts;
  std::vector<std::string> o_lists;
  std::string config_file;

  CLI::App app{"prepfs " PREPFS_VERSION
               " - the preprocessing filesystem: a FUSE cache that serves a dataset\n"
               "(a directory or an s3:// bucket) as raw/, decoded/ and augmented/ from RAM and a local SSD.",
               "prepfs"};
  app.get_formatter()->column_width(26);
  app.add_option("SOURCE", opts.source, "dataset directory (for example an NFS mount)");
  app.add_option("MOUNTPOINT", opts.mountpoint, "an existing, empty directory to mount on");
  // One value per -o: a vector option would otherwise take every word after it, the paths too
  // (`prepfs -o ram=4G SRC MNT`, the order FUSE tools take).
  app.add_option("-o", o_lists, "mount options, key=value[,key=value...] (listed below)")
      ->type_name("OPTS")
      ->allow_extra_args(false);
  app.add_option("--config", config_file, "read options from FILE (key = value lines); -o overrides it")
      ->type_name("FILE");
  app.add_flag("-f,--foreground", opts.foreground, "stay in the foreground (log to stderr)");
  bool debug = false;
  app.add_flag("-d,--debug", debug, "log every FUSE request (implies -f)");
  app.set_version_flag("-V,--version", "prepfs " PREPFS_VERSION);
  app.footer(options_help());

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other parse error is a usage error, status 2 as
    // documented (CLI11's own codes are 100 and up), which the service unit does not restart on.
    return app.exit(e) == 0 ? 0 : 2;
  }

  try {
    // Precedence: defaults < config file < -o (< positional arguments for source/mountpoint).
    std::string src = opts.source, mnt = opts.mountpoint;
    if (!config_file.empty()) prepfs::apply_config_file(opts, config_file);
    if (!src.empty()) opts.source = src;
    if (!mnt.empty()) opts.mountpoint = mnt;
    for (const auto& list : o_lists) prepfs::apply_option_list(opts, list);
    if (debug) prepfs::apply_option(opts, "debug", "", false);
    prepfs::finalize_options(opts);
    if (opts.source.empty() || opts.mountpoint.empty())
      throw prepfs::Error(EINVAL, "SOURCE and MOUNTPOINT are required (see prepfs --help)");
    // A usage error now, not after the scan and the mount (the server is made once they are).
    if (!opts.metrics_addr.empty()) prepfs::MetricsHttpServer::check(opts.metrics_addr);
    prepfs::Daemon::check_options(opts);  // augment=: its spec is parsed by the transform layer
    prepfs::init_logging(opts.log_level);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prepfs: %s\n", e.what());
    return 2;
  }

  // The memory budgets (ram=, transform_mem=) bound what the daemon holds; glibc must not keep
  // much more than that after it is freed. Buffers over 2 MiB (decoded images, libjpeg's
  // coefficient buffers) are mapped and unmapped instead of lingering in per-thread arenas, and
  // the arenas are few. Measured over 64 readers of decoded/ and augmented/ with ram=128M and
  // transform_mem=256M: a peak RSS of 407 MiB with glibc's defaults, 225 MiB with these.
  mallopt(M_MMAP_THRESHOLD, 2 << 20);
  mallopt(M_ARENA_MAX, 8);

  // Background mode forks before any thread exists; the parent waits until the child reports
  // that the mount answers (or why it failed), so errors still reach the terminal.
  int ready_pipe[2] = {-1, -1};
  if (!opts.foreground) {
    if (pipe(ready_pipe) != 0) {
      std::perror("prepfs: pipe");
      return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("prepfs: fork");
      return 1;
    }
    if (pid > 0) {
      close(ready_pipe[1]);
      char status = 1;
      ssize_t n = read(ready_pipe[0], &status, 1);
      return n == 1 && status == 0 ? 0 : 1;
    }
    close(ready_pipe[0]);
    setsid();
  }

  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  StopSignals& stop_signals = *new StopSignals(set);  // never freed: its thread may outlive main()

  std::unique_ptr<prepfs::Daemon> daemon;
  std::unique_ptr<prepfs::Mount> mount;
  std::unique_ptr<prepfs::MetricsHttpServer> metrics_http;
  try {
    opts.mountpoint = prepfs::check_mountpoint(opts.mountpoint);  // before any work on the source
    daemon = std::make_unique<prepfs::Daemon>(opts);
    stop_signals.started();  // a signal during the mount is taken once it answers, then unmounts
    mount = prepfs::Mount::start(*daemon, opts);
    if (!opts.metrics_addr.empty()) {
      metrics_http = std::make_unique<prepfs::MetricsHttpServer>(opts.metrics_addr,
                                                                 [d = daemon.get()] { return d->metrics_text(); });
      spdlog::info("Prometheus metrics at http://{}/metrics", opts.metrics_addr);
    }
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;  // the parent sees the pipe close without a status byte
  }
  spdlog::info("{}", daemon->summary());
  prepfs::sd_notify_ready(daemon->summary());

  if (!opts.foreground) {
    char ok = 0;
    if (write(ready_pipe[1], &ok, 1) != 1) spdlog::warn("could not report readiness to the parent");
    close(ready_pipe[1]);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
      dup2(devnull, 2);
      close(devnull);
    }
    if (chdir("/") != 0) spdlog::debug("chdir /: {}", std::strerror(errno));
    prepfs::init_logging(opts.log_level, prepfs::LogTarget::syslog);
  }

  int sig = stop_signals.wait();
  spdlog::info("{}: unmounting {}", strsignal(sig), opts.mountpoint);
  prepfs::sd_notify_stopping();
  metrics_http.reset();
  daemon->stop();  // no re-plans while the mount goes away
  mount->stop();
  mount.reset();
  daemon.reset();
  spdlog::info("stopped cleanly");
  return 0;
}
