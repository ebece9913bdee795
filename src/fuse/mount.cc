#include "prepfs/fuse/mount.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/common/error.h"
#include "prepfs/common/fs_util.h"
#include "prepfs/common/size.h"
#include "prepfs/core/augmented_fs.h"
#include "prepfs/core/control_fs.h"
#include "prepfs/core/data_fs.h"
#include "prepfs/core/planner.h"
#include "prepfs/core/profiler.h"
#include "prepfs/core/metrics.h"
#include "prepfs/core/metrics_http.h"
#include "prepfs/core/stats_json.h"
#include "prepfs/core/sample_renderer.h"
#include "prepfs/core/tree_store.h"
#include "prepfs/fuse/session.h"
#include "prepfs/source/posix_source.h"
#include "prepfs/source/s3_source.h"
#include "prepfs/transform/error.h"
#include "prepfs/transform/pipeline_spec.h"

namespace prepfs {
namespace {

// A mountpoint must exist, be a directory and not already have something mounted on it.
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
  std::string abs = resolved;
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line)) {
    // Field 5 is the mount point (octal-escaped spaces are irrelevant for an exact compare of
    // ordinary paths; a path with spaces simply will not match and falls through to st_dev).
    size_t pos = 0;
    for (int field = 0; field < 4 && pos != std::string::npos; field++) pos = line.find(' ', pos + 1);
    if (pos == std::string::npos) continue;
    size_t end = line.find(' ', pos + 1);
    if (line.substr(pos + 1, end - pos - 1) == abs && abs != "/")
      throw Error(EBUSY, "mountpoint " + mnt + " is busy: something is already mounted there");
  }
  if (::stat((abs + "/..").c_str(), &parent) == 0 && parent.st_dev != st.st_dev && abs != "/")
    throw Error(EBUSY, "mountpoint " + mnt + " is busy: something is already mounted there");
  return abs;
}

class RunningMount final : public Mount {
 public:
  explicit RunningMount(const Options& o) : opts_(o) {}

  void build() {
    mountpoint_ = check_mountpoint(opts_.mountpoint);
    if (is_s3_url(opts_.source)) {
      S3Config sc;
      sc.endpoint = opts_.s3_endpoint;
      sc.region = opts_.s3_region;
      sc.path_style = opts_.s3_path_style;
      sc.profile = opts_.s3_profile;
      sc.connections = opts_.s3_connections;
      sc.retry_seconds = opts_.s3_retry_time;
      sc.part_size = opts_.s3_part_size;
      source_ = std::make_unique<S3Source>(opts_.source, sc);
    } else {
      source_ = std::make_unique<PosixSource>(opts_.source);
    }

    cache_dir_ = cache_dir_for(opts_.ssd_dir, source_->identity());
    try {
      mkdir_p(cache_dir_);
      lock_fd_ = ::open((cache_dir_ + "/lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
      if (lock_fd_ < 0) throw_errno(errno, "cannot write to " + cache_dir_);
    } catch (const Error& e) {
      throw Error(e.err(), "ssd_dir " + opts_.ssd_dir + " is not usable: " + e.what());
    }
    if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
      throw Error(EBUSY, "ssd_dir " + cache_dir_ + " is in use by another prepfs mount of the same source");

    auto t0 = std::chrono::steady_clock::now();
    TreeLoad loaded = load_or_scan_tree(*source_, cache_dir_ + "/index.bin");
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info("{} {} entries of {} in {:.3f}s ({} of index memory)",
                 loaded.from_index ? "loaded the persisted index:" : "scanned", loaded.tree.size(),
                 opts_.source, secs, format_size(loaded.tree.memory_bytes()));
    index_reused_ = loaded.from_index;

    CacheConfig cc;
    cc.ram_bytes = opts_.ram_bytes;
    cc.ssd_bytes = opts_.ssd_bytes;
    cc.ssd_dir = cache_dir_ + "/ssd";
    cc.eviction = opts_.eviction;
    try {
      cache_ = std::make_unique<TierManager>(cc);
    } catch (const Error& e) {
      throw Error(e.err(), "ssd_dir " + opts_.ssd_dir + " is not usable: " + e.what());
    }

    tree_ = std::make_unique<Tree>(std::move(loaded.tree));
    renderer_ = std::make_unique<SampleRenderer>(*source_, *tree_, *cache_, render_config());
    DataFsConfig dc;
    dc.metadata_ttl = opts_.metadata_ttl;
    data_fs_ = std::make_unique<DataFs>(*source_, *tree_, *cache_, renderer_.get(), dc);
    double timeout = opts_.metadata_ttl < 0 ? 86400.0 : opts_.metadata_ttl;
    augmented_fs_ = std::make_unique<AugmentedFs>(*tree_, *renderer_, opts_.aug_reuse, timeout);
    // The partition model's measurements, ticking once a second from now on.
    profiler_ = std::make_unique<Profiler>(ProfilerSources{*tree_, *source_, *cache_, *renderer_, data_fs_->counters(),
                                                           augmented_fs_->counters(), replies_, opts_.threads,
                                                           opts_.aug_reuse});
    // The partition: a plan now (from priors where nothing is measured yet), then on drift.
    placer_ = std::make_unique<Placer>(*tree_);
    renderer_->set_placer(placer_.get());
    data_fs_->set_placer(placer_.get());
    planner_ = std::make_unique<Planner>(planner_config(), [this](std::string* notes) {
      return profiler_->inputs(notes);
    }, *placer_, *cache_, [this](uint32_t node, Form form) {
      renderer_->forget(node, form, augmented_fs_->current_variant(node));
    });
    planner_->plan_now(opts_.partition == "auto" ? "first plan, from priors where nothing is measured yet"
                                                 : "partition=" + opts_.partition);
    profiler_->on_tick([this] { planner_->on_tick(); });
    profiler_->start(std::chrono::seconds(1));
    control_fs_ = std::make_unique<ControlFs>(std::vector<ControlFs::File>{
        {"stats", [this] { return render_stats_json(*cache_, *source_, *data_fs_, renderer_.get(), profiler_.get()); }},
        {"metrics", [this] { return render_metrics(*cache_, *source_, *data_fs_, renderer_.get(), profiler_.get()); }},
        {"plan", [this] { return planner_->report_text(); }},
        {"plan.json", [this] { return planner_->report_json(); }},
        {"evict", nullptr, [this](std::string_view) { evict(); }},
    });

    SessionConfig main_cfg;
    main_cfg.mountpoint = mountpoint_;
    main_cfg.fsname = opts_.source;
    main_cfg.max_threads = opts_.threads;
    main_cfg.skip_open = true;
    main_cfg.exit_on_unmount = true;  // umount -R MNT (fstab, mount(8)) stops the daemon
    main_cfg.allow_other = opts_.allow_other;
    main_cfg.debug = opts_.debug_fuse;
    main_cfg.negative_timeout = opts_.metadata_ttl < 0 ? 86400.0 : opts_.metadata_ttl;
    main_cfg.reply_counters = &replies_;  // and the augmented session's, which copies this config
    main_ = std::make_unique<FuseSession>(*data_fs_, main_cfg);
    data_fs_->set_invalidator([this](uint64_t ino) { main_->invalidate(ino); });

    SessionConfig aug_cfg = main_cfg;
    aug_cfg.mountpoint = mountpoint_ + "/" + DataFs::kAugmentedDirName;
    aug_cfg.fsname = opts_.source + ":augmented";
    aug_cfg.skip_open = false;  // every open picks the next variant
    aug_cfg.exit_on_unmount = false;
    augmented_ = std::make_unique<FuseSession>(*augmented_fs_, aug_cfg);

    SessionConfig ctl_cfg = main_cfg;
    ctl_cfg.mountpoint = mountpoint_ + "/" + DataFs::kControlDirName;
    ctl_cfg.fsname = "prepfs-control";
    ctl_cfg.max_threads = 4;
    ctl_cfg.reply_counters = nullptr;  // control files are not samples: no copy bandwidth from them
    ctl_cfg.skip_open = false;
    ctl_cfg.negative_timeout = 0;
    ctl_cfg.exit_on_unmount = false;
    ctl_cfg.read_only = false;  // its command files (evict) take writes; the rest answers EROFS
    control_ = std::make_unique<FuseSession>(*control_fs_, ctl_cfg);

    main_->mount();
    main_->start();  // must answer before the nested mounts can look up their directories
    augmented_->mount();
    augmented_->start();
    control_->mount();
    control_->start();

    // Ready means answering: a request that travels through the kernel to our workers.
    struct stat st;
    if (::stat((ctl_cfg.mountpoint + "/stats").c_str(), &st) != 0)
      throw_errno(errno, "the new mount at " + mountpoint_ + " does not answer");

    if (!opts_.metrics_addr.empty()) {
      metrics_http_ = std::make_unique<MetricsHttpServer>(opts_.metrics_addr, [this] {
        return render_metrics(*cache_, *source_, *data_fs_, renderer_.get(), profiler_.get());
      });
      spdlog::info("Prometheus metrics at http://{}/metrics", opts_.metrics_addr);
    }
  }

  // .prepfs/evict: queued SSD writes land first, so nothing reappears after the tiers are empty.
  void evict() {
    cache_->flush();
    cache_->evict_all();
    spdlog::info("evicted every cached entry (.prepfs/evict)");
  }

  void stop() override {
    if (profiler_) profiler_->stop();  // its callbacks (the planner) must not run during teardown
    metrics_http_.reset();
    if (control_) control_->stop();
    if (augmented_) augmented_->stop();
    if (main_) main_->stop();
    if (cache_) cache_->flush();
  }

  ~RunningMount() override {
    stop();
    control_.reset();
    augmented_.reset();
    main_.reset();
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  // The pipeline options, checked: a bad spec is a usage error reported at mount time.
  RenderConfig render_config() const {
    RenderConfig rc;
    rc.format = *transform::parse_output_format(opts_.decoded_format);
    try {
      rc.spec = transform::PipelineSpec::parse(opts_.augment.empty() ? transform::kDefaultAugmentSpec : opts_.augment);
    } catch (const transform::SpecError& e) {
      throw Error(EINVAL, std::string("option augment: ") + e.what());
    }
    rc.augment.limits.max_pixels = opts_.max_pixels;
    // Off by default: a partial decode skips the entropy data of rows outside the crop less
    // strictly than a full decode, so a damaged file could pass in augmented/ but fail in decoded/.
    rc.augment.fast.crop_decode = opts_.crop_decode;
    rc.augment.fast.dct_scale = opts_.fast_paths;
    rc.seed = opts_.seed;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    rc.cpu = opts_.cpu ? opts_.cpu : static_cast<unsigned>(std::max(1L, cores));
    return rc;
  }

  PlannerConfig planner_config() const {
    PlannerConfig pc;
    pc.fixed = opts_.partition != "auto";
    for (size_t t = 0; t < model::kTiers; t++)
      for (size_t f = 0; f < model::kForms; f++) pc.fixed_shares[t][f] = opts_.partition_shares[t * 3 + f];
    // Files that are not samples are admitted as read: the raw quotas leave room for them.
    for (uint32_t id = 0; id < tree_->size(); id++)
      if (S_ISREG(tree_->node(id).mode) && !tree_->dims(id).is_image()) pc.other_bytes += double(tree_->version(id).size);
    return pc;
  }

  std::string summary() const override {
    return "serving " + opts_.source + " at " + mountpoint_ + " (" + std::to_string(data_fs_->tree().size()) +
           " entries, index " + (index_reused_ ? "reused" : "scanned") + ", ram " + format_size(opts_.ram_bytes) +
           ", ssd " + format_size(opts_.ssd_bytes) + " in " + cache_dir_ + ")";
  }

 private:
  Options opts_;
  std::string mountpoint_, cache_dir_;
  int lock_fd_ = -1;
  bool index_reused_ = false;
  std::unique_ptr<Source> source_;
  std::unique_ptr<TierManager> cache_;
  std::unique_ptr<Tree> tree_;
  std::unique_ptr<SampleRenderer> renderer_;
  std::unique_ptr<DataFs> data_fs_;
  std::unique_ptr<AugmentedFs> augmented_fs_;
  std::unique_ptr<ControlFs> control_fs_;
  std::unique_ptr<Placer> placer_;
  std::unique_ptr<Planner> planner_;
  ReplyCounters replies_;  // filled by the data sessions, read by the profiler: outlives both
  std::unique_ptr<FuseSession> main_, augmented_, control_;
  std::unique_ptr<MetricsHttpServer> metrics_http_;
  std::unique_ptr<Profiler> profiler_;  // last: destroyed (and stopped) first
};

}  // namespace

std::string cache_dir_for(const std::string& ssd_dir, const std::string& source_identity) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(source_identity.data(), source_identity.size())));
  return ssd_dir + "/" + hex;
}

std::unique_ptr<Mount> Mount::start(const Options& opts) {
  auto m = std::make_unique<RunningMount>(opts);
  m->build();  // on an exception the destructor unmounts whatever was mounted
  return m;
}

}  // namespace prepfs
