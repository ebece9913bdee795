#include "prepfs/daemon/daemon.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "prepfs/cache/memcached_store.h"
#include "prepfs/cache/shared_tier.h"
#include "prepfs/cache/tier_manager.h"
#include "prepfs/common/cpu_times.h"
#include "prepfs/common/error.h"
#include "prepfs/common/fs_util.h"
#include "prepfs/common/private_dir.h"
#include "prepfs/common/size.h"
#include "prepfs/core/augmented_fs.h"
#include "prepfs/core/control_fs.h"
#include "prepfs/core/data_fs.h"
#include "prepfs/core/job_files.h"
#include "prepfs/core/view_paths.h"
#include "prepfs/index/sample_list.h"
#include "prepfs/index/sample_shapes.h"
#include "prepfs/index/tree_store.h"
#include "prepfs/observe/metrics.h"
#include "prepfs/observe/shared_report.h"
#include "prepfs/observe/stats_json.h"
#include "prepfs/partition/cpu_autoscaler.h"
#include "prepfs/partition/job_knowledge.h"
#include "prepfs/partition/placer.h"
#include "prepfs/partition/planner.h"
#include "prepfs/partition/profiler.h"
#include "prepfs/partition/shared_forms.h"
#include "prepfs/source/posix_source.h"
#include "prepfs/source/s3_source.h"
#include "prepfs/store/header_prober.h"
#include "prepfs/store/prefetcher.h"
#include "prepfs/store/render_ahead.h"
#include "prepfs/store/renderer.h"
#include "prepfs/store/sample_store.h"
#include "prepfs/store/staging.h"
#include "prepfs/transform/error.h"
#include "prepfs/transform/pipeline_spec.h"

namespace prepfs {
namespace {

std::unique_ptr<Source> make_source(const Options& o) {
  if (!is_s3_url(o.source)) return std::make_unique<PosixSource>(o.source);
  S3Config sc;
  sc.endpoint = o.s3_endpoint;
  sc.region = o.s3_region;
  sc.path_style = o.s3_path_style;
  sc.profile = o.s3_profile;
  sc.connections = o.s3_connections;
  sc.retry_seconds = o.s3_retry_time;
  sc.request_timeout = o.s3_timeout;
  sc.part_size = o.s3_part_size;
  return std::make_unique<S3Source>(o.source, sc);
}

// The cache directory of one source, held with an exclusive lock for the daemon's life: two
// daemons caching the same source into one directory would evict each other's files. Both it and
// ssd_dir must be private to the daemon's uid (owned by it, not writable by group or others): the
// bytes cached there are served as the source's, and the index names every file.
class CacheDirLock {
 public:
  CacheDirLock(const std::string& ssd_dir, const std::string& name) {
    try {
      PrivateDir top = PrivateDir::open_path(ssd_dir);
      dir_ = top.open_sub(name, true);
      fd_ = ::openat(dir_.fd(), "lock", O_CREAT | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd_ < 0) throw_errno(errno, "cannot write to " + dir_.path());
    } catch (const Error& e) {
      throw Error(e.err(), "ssd_dir " + ssd_dir + " is not usable: " + e.what());
    }
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw Error(EBUSY, "ssd_dir " + dir_.path() + " is in use by another prepfs mount of the same source");
    }
    // An index written by an older version was world-readable: it names every file.
    int index = ::openat(dir_.fd(), "index.bin", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (index >= 0) {
      ::fchmod(index, 0600);
      ::close(index);
    }
  }
  ~CacheDirLock() { ::close(fd_); }
  const std::string& path() const { return dir_.path(); }  // resolved: every path below is made from it
  CacheDirLock(const CacheDirLock&) = delete;
  CacheDirLock& operator=(const CacheDirLock&) = delete;

 private:
  PrivateDir dir_;
  int fd_ = -1;
};

// The pipeline options, checked: a bad spec is a usage error reported at mount time.
SampleShapes shapes_from(const Options& o) {
  SampleShapes s;
  s.format = *transform::parse_output_format(o.decoded_format);
  try {
    s.spec = transform::PipelineSpec::parse(o.augment.empty() ? transform::kDefaultAugmentSpec : o.augment);
  } catch (const transform::SpecError& e) {
    throw Error(EINVAL, std::string("option augment: ") + e.what());
  }
  s.max_pixels = o.max_pixels;
  return s;
}

// The most transforms that may run at once: cpu=N, else every core this process may use (cpu=auto
// moves between 1 and that).
unsigned transform_cores(const Options& o) { return o.cpu && !o.cpu_auto ? o.cpu : usable_cores(); }

// cpu=auto starts from one transform worker and grows while readers wait on renders (Cachew also
// starts from one worker): the first tick comes a second into the mount.
CpuAutoscalerConfig autoscaler_config(const Options& o, unsigned cores) {
  CpuAutoscalerConfig c;
  c.automatic = o.cpu_auto;
  c.fixed_slots = cores;
  c.cores = cores;
  c.online_cpus = online_cpus();
  c.start_slots = 1;
  return c;
}

// The default transform budget: 128 MiB per transform core (a 12-megapixel photo at its peak),
// at least 512 MiB, at most a quarter of the machine's memory.
uint64_t transform_mem(const Options& o, unsigned cores) {
  if (o.transform_mem) return o.transform_mem;
  const uint64_t physical = physical_memory_bytes();
  const uint64_t by_cores = std::max<uint64_t>(512ull << 20, uint64_t(cores) * (128ull << 20));
  return std::max<uint64_t>(64ull << 20, std::min(by_cores, physical / 4));
}

// The shared tier of shared=, or null. Makes no connection: the first reads do.
std::unique_ptr<SharedTier> make_shared_tier(const Options& o) {
  if (o.shared.empty()) return nullptr;
  MemcachedConfig mc;
  mc.servers = o.shared;
  mc.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.shared_timeout * 1000));
  SharedTierConfig sc;
  sc.lease_ttl = std::chrono::milliseconds(static_cast<int64_t>(o.shared_lease_ttl * 1000));
  // Entries waiting to be published are held beside the RAM tier's budget: an eighth of it, from
  // 4 MiB (a few chunks) to 64 MiB.
  sc.publish_queue_bytes = std::clamp<uint64_t>(o.ram_bytes / 8, 4ull << 20, 64ull << 20);
  auto tier = std::make_unique<SharedTier>(std::make_unique<MemcachedStore>(mc), sc);
  // shared_forms= fixes the forms; auto starts with raw and decoded until the first plan decides.
  tier->set_forms(fixed_shared_forms(o).value_or(std::array<bool, kForms>{true, true, false}));
  return tier;
}

CacheConfig cache_config(const Options& o, const std::string& cache_dir, size_t nodes, const SampleKnowledge* k,
                         SharedTier* shared) {
  CacheConfig cc;
  cc.shared = shared;
  cc.ram_bytes = o.ram_bytes;
  cc.ssd_bytes = o.ssd_bytes;
  cc.ssd_dir = cache_dir + "/ssd";
  cc.eviction = o.eviction;
  cc.samples = nodes;
  cc.knowledge = k;
  return cc;
}

// Entries fetched ahead of their read wait in the staging area: prefetches (prefetch_window
// bounds them) and the first chunks a lazy first mount reads for image headers, which need room
// even with prefetching off.
constexpr uint64_t kMinStaging = 32ull << 20;

StoreConfig::Members members_for(const std::string& eviction) {
  if (eviction == "belady" || eviction == "importance") return StoreConfig::Members::policy;
  if (eviction == "auto") return StoreConfig::Members::policy_with_order;
  return StoreConfig::Members::placement;
}

std::string shared_names(const Options& o) {
  std::string s;
  for (const SharedServer& sv : o.shared) s += (s.empty() ? "" : ",") + sv.host + ":" + std::to_string(sv.port);
  return s;
}

// Where this source's cache and index live below ssd_dir: a hash of the source's identity.
std::string cache_dir_name(const std::string& source_identity) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(source_identity.data(), source_identity.size())));
  return hex;
}

}  // namespace

// Declared in construction order: each part's collaborators come before it, and destruction
// runs the other way.
struct Daemon::Parts {
  Options opts;
  std::unique_ptr<Source> source;
  std::string cache_dir;
  std::unique_ptr<CacheDirLock> lock;
  bool index_reused = false;
  bool restarted = false;  // over an index of this source, reused or rescanned (TreeLoad::restarted)
  std::unique_ptr<Tree> tree;
  SampleShapes shapes;
  std::once_flag samples_once;
  std::unique_ptr<SampleList> samples_list;  // built on first use, once every header is known
  std::unique_ptr<JobKnowledge> knowledge;   // published orders, importance
  std::unique_ptr<SharedTier> shared;        // null without shared=
  uint64_t shared_ticks = 0;                 // the profiler's thread only
  std::mutex shared_mu;                      // guards shared_why
  std::string shared_why;                    // why shared_forms=auto chose its forms (.prepfs/plan)
  std::unique_ptr<TierManager> cache;
  ViewCounters views;
  RenderCounters renders;
  PrefetchCounters prefetch_counters;
  RenderAheadCounters ahead_counters;
  ReplyCounters replies;  // filled by the front door's data sessions, read by the profiler
  Invalidations invalidations;
  Invalidations augmented_invalidations;  // the augmented session's
  std::unique_ptr<Placer> placer;
  std::unique_ptr<Renderer> renderer;
  std::unique_ptr<CpuAutoscaler> cpu;  // the renderer's slot count (cpu=auto), and its report
  std::unique_ptr<Staging> staging;
  std::unique_ptr<SampleStore> store;
  std::unique_ptr<RenderAhead> render_ahead;  // null with render_ahead=0
  std::unique_ptr<HeaderProber> prober;
  std::unique_ptr<DataFs> data_fs;
  std::unique_ptr<AugmentedFs> augmented_fs;
  std::unique_ptr<ImageNames> image_names;
  std::unique_ptr<ViewPaths> view_paths;
  std::unique_ptr<Prefetcher> prefetcher;  // null with prefetch_window=0
  std::unique_ptr<Profiler> profiler;
  std::unique_ptr<Planner> planner;
  std::unique_ptr<ControlFs> control_fs;

  // Once a file is seen changed (a read found another version, or revalidation did), the
  // persisted index is marked stale at once, so that even after a crash the next mount lists the
  // source again rather than serving EIO for every changed file forever.
  std::atomic<bool> index_marked_stale{false};  // read by the header prober's thread too
  void note_source_changes() {
    if (index_marked_stale || (load(source->counters().changed) == 0 && load(views.changed_files) == 0)) return;
    index_marked_stale = true;
    mark_index_stale(cache_dir + "/index.bin");
    spdlog::info("files of {} changed under this mount: the next mount lists it again", opts.source);
  }

  // The sample list jobs index by (.prepfs/samples, resident, importance): it needs every
  // header, so the first job to ask waits for the probing to finish.
  const SampleList& samples() {
    std::call_once(samples_once, [&] {
      prober->ensure_all();
      samples_list = std::make_unique<SampleList>(*tree, shapes);
    });
    return *samples_list;
  }

  // Every image header is known (checked each profiler tick): persist them, and plan with the
  // real sample count (the plan at mount saw only the headers known then).
  bool headers_done = false;  // the profiler's thread only, once running
  void headers_known() {
    headers_done = true;
    persist_index();
    profiler->refresh_sizes();
    planner->plan_with_complete_index("every image header read", restarted, other_bytes());
  }

  // shared_forms=auto, each profiler tick: the forms worth sharing from what the profiler and the
  // shared tier measured (partition/shared_forms.h).
  void choose_shared_forms() {
    const Profile pr = profiler->profile();
    const SharedCounters& c = shared->counters();
    SharedFormInputs in;
    in.raw_bytes = pr.size[index_of(Form::raw)];
    in.decoded_bytes = pr.size[index_of(Form::decoded)];
    in.c_dec = pr.c_dec;
    in.src_latency = pr.src_latency;
    in.src_bandwidth = pr.src_bandwidth;
    const uint64_t gets = load(c.gets), hit_ns = load(c.hit_ns);
    in.shared_measured = gets > 0;
    in.decoded_shared_now = shared->shares(Form::decoded);
    if (gets > 0) in.shared_latency = double(load(c.get_ns)) / 1e9 / double(gets);
    if (hit_ns > 0) in.shared_bandwidth = double(load(c.hit_bytes)) * 1e9 / double(hit_ns);
    SharedFormChoice choice = prepfs::choose_shared_forms(in);
    shared->set_forms(choice.forms);
    std::lock_guard lock(shared_mu);
    shared_why = std::move(choice.why);
  }

  void persist_index() {
    if (index_marked_stale) return;  // a stale index must stay marked so: the next mount rescans
    try {
      save_tree(*tree, *source, cache_dir + "/index.bin");
    } catch (const Error& e) {
      spdlog::warn("cannot persist the metadata index ({}); the next mount will read the headers again", e.what());
    }
    // Reads go on while it saves (and the save removed any marker): a change one of them saw
    // meanwhile marks what was just saved, not only at the next tick or stop, which a crash
    // could forestall.
    note_source_changes();
  }

  StatsSources stats_sources() const {
    return StatsSources{*cache,          *source,        *tree, views, renders, profiler.get(), &prefetch_counters,
                        knowledge.get(), &ahead_counters};
  }

  PlannerConfig planner_config() const {
    PlannerConfig pc;
    pc.fixed = opts.partition != "auto";
    for (size_t t = 0; t < kTiers; t++)
      for (size_t f = 0; f < kForms; f++) pc.fixed_shares[t][f] = opts.partition_shares[t * 3 + f];
    pc.other_bytes = other_bytes();
    return pc;
  }

  // Files that are not samples are admitted as read: the raw quotas leave room for them. Only
  // the files whose headers are known count (at a lazy mount, a few), so headers_known() counts
  // again.
  double other_bytes() const {
    double bytes = 0;
    for (uint32_t id = 0; id < tree->size(); id++)
      if (S_ISREG(tree->mode(id)) && tree->dims(id).known() && !shapes.is_sample(tree->dims(id)))
        bytes += double(tree->version(id).size);
    return bytes;
  }
};

void Daemon::check_options(const Options& opts) { shapes_from(opts); }

Daemon::Daemon(const Options& opts) : p_(std::make_unique<Parts>()) {
  Parts& p = *p_;
  p.opts = opts;
  p.shapes = shapes_from(opts);  // option errors first, before anything touches the disk
  p.source = make_source(opts);
  p.lock = std::make_unique<CacheDirLock>(opts.ssd_dir, cache_dir_name(p.source->identity()));
  p.cache_dir = p.lock->path();

  auto t0 = std::chrono::steady_clock::now();
  // A first mount lists the source and serves at once; the image headers it does not know yet
  // are read while serving (the HeaderProber below).
  TreeLoad loaded = load_or_scan_tree(*p.source, p.cache_dir + "/index.bin", /*probe=*/!opts.probe_lazily);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("{} {} entries of {} in {:.3f}s ({} of index memory)",
               loaded.from_index ? "loaded the persisted index:" : "scanned", loaded.tree.size(), opts.source, secs,
               format_size(loaded.tree.memory_bytes()));
  p.index_reused = loaded.from_index;
  p.restarted = loaded.restarted;
  p.tree = std::make_unique<Tree>(std::move(loaded.tree));

  p.knowledge = std::make_unique<JobKnowledge>(p.tree->size());
  p.shared = make_shared_tier(opts);
  try {
    p.cache = std::make_unique<TierManager>(
        cache_config(opts, p.cache_dir, p.tree->size(), p.knowledge.get(), p.shared.get()));
  } catch (const Error& e) {
    throw Error(e.err(), "ssd_dir " + opts.ssd_dir + " is not usable: " + e.what());
  }

  p.placer = std::make_unique<Placer>(*p.tree, p.shapes);
  RenderConfig rc;
  rc.shapes = p.shapes;
  // On by default: a partial decode gives the same bytes and fails on the same files as a full one.
  rc.fast.crop_decode = opts.crop_decode;
  rc.fast.dct_scale = opts.fast_paths;
  rc.seed = opts.seed;
  rc.cpu = transform_cores(opts);
  rc.transform_mem = transform_mem(opts, rc.cpu);
  rc.max_input = opts.max_input;
  rc.files = p.tree->size();
  p.renderer = std::make_unique<Renderer>(rc, p.renders);
  p.cpu = std::make_unique<CpuAutoscaler>(autoscaler_config(opts, rc.cpu), p.renders,
                                          [&p](unsigned slots) { p.renderer->set_cpu_slots(slots); });
  p.staging = std::make_unique<Staging>(std::max<uint64_t>(opts.prefetch_window, kMinStaging), p.cache->residency(),
                                        p.prefetch_counters, p.ahead_counters);
  StoreConfig sc;
  sc.members = members_for(opts.eviction);
  p.store = std::make_unique<SampleStore>(*p.source, *p.tree, *p.cache, *p.placer, *p.renderer, sc,
                                          JobSupport{p.knowledge.get(), p.staging.get(), &p.prefetch_counters});

  if (opts.render_ahead)
    p.render_ahead =
        std::make_unique<RenderAhead>(*p.store, *p.renderer, p.knowledge.get(), p.ahead_counters,
                                      [&p](uint32_t node) { return p.augmented_fs->current_variant(node); });

  p.prober = std::make_unique<HeaderProber>(*p.tree, *p.store, *p.source, std::max(4u, std::min(opts.threads, 32u)));
  // A few headers now, so that the plan at mount knows roughly how many files are images and how
  // large their forms are; the rest are read while serving.
  p.prober->ensure_some(64);
  if (!opts.probe_lazily) p.prober->unread_failed_at_mount();  // each read at mount: what is unread failed

  DataFsConfig dc;
  dc.metadata_ttl = opts.metadata_ttl;
  // What still shows as unknown after uid=/gid= (not given) becomes the mounting user's in the
  // FUSE adaptor, like the mount's own directories.
  dc.unowned = Owner{opts.uid, opts.gid};
  p.data_fs = std::make_unique<DataFs>(*p.tree, *p.source, *p.store, p.views, p.invalidations, dc, p.prober.get());
  const double timeout = opts.metadata_ttl < 0 ? 86400.0 : opts.metadata_ttl;
  p.augmented_fs = std::make_unique<AugmentedFs>(*p.tree, *p.store, p.views, opts.aug_reuse, timeout, dc.unowned,
                                                 p.prober.get(), p.render_ahead.get(), opts.aug_page_cache,
                                                 &p.data_fs->revalidator(), &p.augmented_invalidations,
                                                 p.renderer->config().transform_mem);
  // What was staged for a file's old version is never served (the keys name it): its room goes.
  p.data_fs->revalidator().on_change([&p](uint32_t node, const FileVersion&) { p.staging->drop_sample(node); });
  p.image_names = std::make_unique<ImageNames>(*p.tree, transform::extension(p.shapes.format));
  p.view_paths = std::make_unique<ViewPaths>(*p.tree, *p.image_names);
  if (opts.prefetch_window > 0) {
    PrefetchConfig pc;
    pc.window_bytes = opts.prefetch_window;
    pc.max_in_flight = opts.prefetch_threads;
    // never: a century (milliseconds::max() would overflow when compared in nanoseconds).
    pc.idle_after = opts.prefetch_idle >= 0 ? std::chrono::milliseconds(static_cast<int64_t>(opts.prefetch_idle * 1000))
                                            : std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  std::chrono::hours(24 * 365 * 100));
    p.prefetcher =
        std::make_unique<Prefetcher>(*p.store, *p.knowledge, *p.staging, *p.renderer, pc, p.prefetch_counters,
                                     [&p](uint32_t node, uint32_t later) {
                                       return p.augmented_fs->current_variant(node, later);
                                     });
  }

  // The partition model's measurements, ticking once a second from the end of construction.
  p.profiler = std::make_unique<Profiler>(ProfilerSources{*p.tree, p.shapes, *p.source, *p.cache, p.renders, p.views,
                                                          p.replies, opts.threads, opts.aug_reuse, rc.cpu});
  // The partition: a plan now (from priors where nothing is measured yet), then on drift. A
  // sample the new plan moves loses its old slot's entries; the samples served so far set how
  // long a move has to pay for itself.
  p.planner = std::make_unique<Planner>(
      p.planner_config(), [&p](std::string* notes) { return p.profiler->inputs(notes); }, *p.placer, *p.cache,
      [&p](uint32_t node, Form form) {
        p.store->forget(p.store->resolve(node), form, p.augmented_fs->current_variant(node));
      },
      p.cpu.get(), [&p] { return double(p.profiler->samples_served()); });
  p.planner->plan_now(opts.partition == "auto" ? "first plan, from priors where nothing is measured yet"
                                               : "partition=" + opts.partition);
  if (p.shared && !fixed_shared_forms(p.opts)) p.choose_shared_forms();  // from priors, then each tick

  p.control_fs = std::make_unique<ControlFs>(std::vector<ControlFs::File>{
      {"stats", [&p] { return render_stats_json(p.stats_sources()); }},
      {"metrics", [&p] { return render_metrics(p.stats_sources()); }},
      {"plan",
       [&p] {
         std::string why;
         {
           std::lock_guard lock(p.shared_mu);
           why = p.shared_why;
         }
         return p.planner->report_text() +
                shared_plan_text(p.shared.get(), fixed_shared_forms(p.opts).has_value(), why);
       }},
      {"plan.json", [&p] { return p.planner->report_json(); }},
      {"evict", nullptr, [this](std::string_view) { evict_all(); }},
      // Both need every header read first (minutes on a lazy first mount of a large dataset), and
      // `samples` is about 100 bytes a file: a stat or `ls -l` must not render them.
      {"samples", [&p] { return render_samples(p.samples(), *p.tree, *p.view_paths); }, nullptr, nullptr, false},
      {"resident", [&p] { return render_resident(p.samples(), p.cache->residency()); }, nullptr, nullptr, false},
      {"order", nullptr, nullptr,
       [&p](uint32_t uid) {
         return open_order_session(
             *p.knowledge, *p.view_paths, [&p] { if (p.prefetcher) p.prefetcher->wake(); },
             job_owner_suffix(uid, ::geteuid()));
       },
       true, /*anyone_writes=*/true},
      {"importance", nullptr, nullptr,
       [&p](uint32_t) { return open_importance_session(*p.knowledge, p.samples(), *p.view_paths); }, true,
       /*anyone_writes=*/true},
  });

  p.profiler->on_tick([&p] {
    // The shared tier's servers: capacity (for the plan), item size (for splitting), state. On
    // this thread, never a reader's: a dead server costs this call its timeouts.
    if (p.shared && p.shared_ticks++ % 30 == 0) p.shared->store().refresh_servers();
    if (p.shared && !fixed_shared_forms(p.opts)) p.choose_shared_forms();
    // Once the last header a lazy first mount did not read is known (or failed its last read):
    // persist, and plan again.
    if (!p.headers_done && p.prober->settled()) p.headers_known();
    p.cpu->tick();  // cpu=auto: the slot count for the next second, before the plan reads it
    p.planner->on_tick();
    p.note_source_changes();
  });
  p.headers_done = p.tree->probed();  // nothing left to read: the plan at mount stands
  p.profiler->start(std::chrono::seconds(1));
}

Daemon::~Daemon() { stop(); }

void Daemon::stop() {
  p_->profiler->stop();  // its callbacks (the planner) must not run during teardown
  p_->note_source_changes();
  if (p_->prefetcher) p_->prefetcher->stop();
  if (p_->render_ahead) p_->render_ahead->stop();
  if (!p_->headers_done) p_->persist_index();  // the headers read so far: the next mount reads only the rest
  if (!p_->cache->flush(std::chrono::seconds(10)))
    spdlog::warn("the SSD did not take every queued write within 10 s; the rest are dropped at exit");
}

void Daemon::evict_all() {
  // Queued SSD writes are dropped rather than waited for: under steady misses the queue never
  // drains, and nothing queued before the eviction may land after it.
  p_->cache->evict_all();
  p_->staging->clear();
  spdlog::info("evicted every cached entry (.prepfs/evict)");
}

Filesystem& Daemon::main_fs() { return *p_->data_fs; }
Filesystem& Daemon::augmented_fs() { return *p_->augmented_fs; }
Filesystem& Daemon::control_fs() { return *p_->control_fs; }
Invalidations& Daemon::invalidations() { return p_->invalidations; }
Invalidations& Daemon::augmented_invalidations() { return p_->augmented_invalidations; }
ReplyCounters& Daemon::replies() { return p_->replies; }
std::string Daemon::metrics_text() { return render_metrics(p_->stats_sources()); }
std::string Daemon::stats_json() { return render_stats_json(p_->stats_sources()); }
const Options& Daemon::options() const { return p_->opts; }
TierManager& Daemon::cache() { return *p_->cache; }
SampleStore& Daemon::store() { return *p_->store; }
Renderer& Daemon::renderer() { return *p_->renderer; }
Staging& Daemon::staging() { return *p_->staging; }
Planner& Daemon::planner() { return *p_->planner; }
Placer& Daemon::placer() { return *p_->placer; }
Profiler& Daemon::profiler() { return *p_->profiler; }
const Tree& Daemon::tree() const { return *p_->tree; }
const RenderCounters& Daemon::renders() const { return p_->renders; }
const ViewCounters& Daemon::views() const { return p_->views; }
RenderAhead* Daemon::render_ahead() { return p_->render_ahead.get(); }
const RenderAheadCounters& Daemon::render_ahead_counters() const { return p_->ahead_counters; }
const PrefetchCounters& Daemon::prefetch_counters() const { return p_->prefetch_counters; }
Source& Daemon::source() { return *p_->source; }

std::string Daemon::summary() const {
  const Parts& p = *p_;
  return "serving " + p.opts.source + " at " + p.opts.mountpoint + " (" + std::to_string(p.tree->size()) +
         " entries, index " + (p.index_reused ? "reused" : "scanned") + ", ram " + format_size(p.opts.ram_bytes) +
         ", ssd " + format_size(p.opts.ssd_bytes) + " in " + p.cache_dir + ", transform_mem " +
         format_size(p.renderer->config().transform_mem) +
         (p.shared ? ", shared tier on " + shared_names(p.opts) : "") + ")";
}

}  // namespace prepfs
