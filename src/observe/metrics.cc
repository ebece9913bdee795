#include "prepfs/observe/metrics.h"

#include <fmt/format.h>

namespace prepfs {

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void PromText::family(std::string_view name, std::string_view type, std::string_view help) {
  // HELP text escapes backslash and newline only.
  std::string h;
  for (char c : help) {
    if (c == '\\')
      h += "\\\\";
    else if (c == '\n')
      h += "\\n";
    else
      h += c;
  }
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, h, name, type);
}

void PromText::labels(Labels l) {
  if (l.size() == 0) return;
  out_ += '{';
  bool first = true;
  for (const auto& [k, v] : l) {
    if (!first) out_ += ',';
    first = false;
    out_ += fmt::format("{}=\"{}\"", k, escape_label_value(v));
  }
  out_ += '}';
}

void PromText::sample(std::string_view name, Labels l, double value) {
  out_ += name;
  labels(l);
  out_ += fmt::format(" {}\n", value);
}

void PromText::sample(std::string_view name, Labels l, uint64_t value) {
  out_ += name;
  labels(l);
  out_ += fmt::format(" {}\n", value);
}

void PromText::histogram_seconds(std::string_view name, std::string_view help, const LatencyHistogram& h) {
  family(name, "histogram", help);
  std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  for (int i = 0; i < LatencyHistogram::kBuckets; i++) {
    cumulative += load(h.buckets[i]);
    std::string le = i < LatencyHistogram::kBuckets - 1
                         ? fmt::format("{}", double(LatencyHistogram::kBoundsNs[i]) / 1e9)
                         : std::string("+Inf");
    sample(bucket, {{"le", le}}, cumulative);
  }
  sample(std::string(name) + "_sum", {}, double(load(h.sum_ns)) / 1e9);
  sample(std::string(name) + "_count", {}, cumulative);
}

namespace {

// The profiler's EWMAs as gauges (the same values as .prepfs/stats "profile").
void profile_gauges(PromText& p, const Profile& pr) {
  auto gauge = [&](const char* name, const char* help, double v) {
    p.family(name, "gauge", help);
    p.sample(name, {}, v);
  };
  p.family("prepfs_profile_size_bytes", "gauge", "Mean bytes per sample, per form.");
  for (Form f : kAllForms)
    p.sample("prepfs_profile_size_bytes", {{"form", form_name(f)}}, pr.size[static_cast<size_t>(f)]);
  gauge("prepfs_profile_source_latency_seconds", "EWMA of the source's time per read request.", pr.src_latency);
  gauge("prepfs_profile_source_bandwidth_bytes_per_second",
        "Lower bound of the source's bandwidth: max(one request's throughput, decayed peak rate).", pr.src_bandwidth);
  gauge("prepfs_profile_source_concurrency_in_use", "EWMA of the source reads in flight while reading.",
        pr.src_concurrency_in_use);
  gauge("prepfs_profile_ssd_read_bytes_per_second", "Lower bound of the SSD tier's read bandwidth.", pr.ssd_read_bw);
  gauge("prepfs_profile_ssd_write_bytes_per_second", "The SSD tier's writer thread: bytes per second busy.",
        pr.ssd_write_bw);
  p.family("prepfs_profile_cpu_seconds_per_sample", "gauge", "EWMA of thread CPU seconds per sample, by kind.");
  p.sample("prepfs_profile_cpu_seconds_per_sample", {{"kind", "decode"}}, pr.c_dec);
  p.sample("prepfs_profile_cpu_seconds_per_sample", {{"kind", "augment"}}, pr.c_aug);
  p.sample("prepfs_profile_cpu_seconds_per_sample", {{"kind", "augment_from_decoded"}}, pr.c_aug_from_decoded);
  gauge("prepfs_profile_copy_bytes_per_second", "FUSE reply copy bandwidth: one thread's rate times the cores.",
        pr.copy_bw);
  p.family("prepfs_profile_view_share", "gauge", "EWMA of each view's share of the samples requested.");
  for (Form f : kAllForms)
    p.sample("prepfs_profile_view_share", {{"view", form_name(f)}}, pr.view_share[static_cast<size_t>(f)]);
}

// The tier shared with other nodes: what it answered per form, and its servers.
void shared_metrics(PromText& p, SharedTier& shared) {
  const SharedCounters& c = shared.counters();
  using PF = SharedCounters::PerForm;
  auto per_form = [&](const char* name, const char* help, std::atomic<uint64_t> PF::*field) {
    p.family(name, "counter", help);
    for (Form f : kAllForms) p.sample(name, {{"form", form_name(f)}}, load(c.by_form[index_of(f)].*field));
  };
  per_form("prepfs_shared_hits_total", "Entries read from the shared tier.", &PF::hits);
  per_form("prepfs_shared_hit_bytes_total", "Bytes read from the shared tier.", &PF::hit_bytes);
  per_form("prepfs_shared_misses_total", "Shared-tier misses this node filled (from the source or a render).",
           &PF::misses);
  per_form("prepfs_shared_published_total", "Entries this node stored in the shared tier for the others.",
           &PF::published);
  per_form("prepfs_shared_published_bytes_total", "Bytes this node stored in the shared tier.", &PF::published_bytes);
  per_form("prepfs_shared_leases_total", "Fills this node did under a shared-tier lease.", &PF::leases);
  per_form("prepfs_shared_lease_waits_total", "Misses that waited for another node's fill.", &PF::lease_waits);
  per_form("prepfs_shared_lease_wait_hits_total", "Lease waits that got the other node's entry.", &PF::lease_wait_hits);
  per_form("prepfs_shared_lease_timeouts_total", "Lease waits that gave up after shared_lease_ttl and filled here.",
           &PF::lease_timeouts);
  per_form("prepfs_shared_corrupt_total", "Shared values that failed their checks (then refetched).", &PF::corrupt);
  per_form("prepfs_shared_errors_total", "Shared-tier calls that failed (server down, slow or unreachable).",
           &PF::errors);
  p.family("prepfs_shared_publish_queue_entries", "gauge", "Entries filled here waiting to be stored for the others.");
  p.sample("prepfs_shared_publish_queue_entries", {}, load(c.publish_queued));
  p.family("prepfs_shared_publish_queue_bytes", "gauge", "Bytes of the entries waiting to be stored for the others.");
  p.sample("prepfs_shared_publish_queue_bytes", {}, load(c.publish_queued_bytes));
  p.family("prepfs_shared_publish_dropped_total", "counter",
           "Entries not stored for the others: the publishing queue was full, or the daemon stopped first.");
  p.sample("prepfs_shared_publish_dropped_total", {}, load(c.publish_dropped));
  p.family("prepfs_shared_form_enabled", "gauge", "1 for the forms the shared tier keeps (the plan's choice).");
  for (Form f : kAllForms) p.sample("prepfs_shared_form_enabled", {{"form", form_name(f)}}, uint64_t(shared.shares(f)));
  p.histogram_seconds("prepfs_shared_get_seconds", "Latency of shared-tier lookups (found or not).", c.get_latency);
  p.family("prepfs_shared_server_up", "gauge", "0 while a memcached server is skipped after a failure.");
  const std::vector<KvServerState> servers = shared.store().servers();
  for (const KvServerState& sv : servers) p.sample("prepfs_shared_server_up", {{"server", sv.name}}, uint64_t(sv.up));
  p.family("prepfs_shared_server_capacity_bytes", "gauge", "memcached memory (-m) plus extstore, as last reported.");
  for (const KvServerState& sv : servers)
    p.sample("prepfs_shared_server_capacity_bytes", {{"server", sv.name}}, sv.memory_bytes + sv.extstore_bytes);
}

}  // namespace

std::string render_metrics(const StatsSources& s) {
  TierManager& cache = s.cache;
  Source& source = s.source;
  const Profiler* profiler = s.profiler;
  PromText p;
  const CacheCounters& cc = cache.counters();
  SsdTier* ssd = cache.ssd();
  struct NamedCounters {
    const char* name;
    const TierCounters& c;
  };
  const NamedCounters tiers[] = {{"ram", cc.ram}, {"ssd", cc.ssd}};

  auto per_tier = [&](const char* name, const char* help, std::atomic<uint64_t> TierCounters::*field) {
    p.family(name, "counter", help);
    for (const NamedCounters& t : tiers) p.sample(name, {{"tier", t.name}}, load(t.c.*field));
  };
  per_tier("prepfs_cache_hits_total", "Chunk lookups answered by the tier.", &TierCounters::hits);
  per_tier("prepfs_cache_misses_total", "Chunk lookups the tier could not answer.", &TierCounters::misses);
  per_tier("prepfs_cache_hit_bytes_total", "Bytes served from the tier.", &TierCounters::hit_bytes);
  per_tier("prepfs_cache_inserts_total", "Chunks admitted to the tier.", &TierCounters::inserts);
  per_tier("prepfs_cache_evictions_total", "Chunks evicted from the tier to make room.", &TierCounters::evictions);
  per_tier("prepfs_cache_rejected_total", "Admissions the tier refused.", &TierCounters::rejected);
  per_tier("prepfs_cache_corrupt_total", "Entries that failed their checksum (then refetched).",
           &TierCounters::corrupt);
  per_tier("prepfs_cache_write_errors_total", "Failed tier writes.", &TierCounters::write_errors);

  p.family("prepfs_cache_entries", "gauge", "Chunks held by the tier.");
  const TierStats ram_stats = cache.stats(Tier::ram), ssd_stats = cache.stats(Tier::ssd);
  p.sample("prepfs_cache_entries", {{"tier", "ram"}}, uint64_t(ram_stats.entries));
  p.sample("prepfs_cache_entries", {{"tier", "ssd"}}, uint64_t(ssd_stats.entries));
  p.family("prepfs_cache_budget_bytes", "gauge", "Byte budget of the tier.");
  p.sample("prepfs_cache_budget_bytes", {{"tier", "ram"}}, ram_stats.budget);
  p.sample("prepfs_cache_budget_bytes", {{"tier", "ssd"}}, ssd_stats.budget);
  p.family("prepfs_cache_bytes", "gauge", "Bytes held by the tier, per form.");
  for (Form f : kAllForms) {
    p.sample("prepfs_cache_bytes", {{"tier", "ram"}, {"form", form_name(f)}}, ram_stats.bytes_of(f));
    p.sample("prepfs_cache_bytes", {{"tier", "ssd"}, {"form", form_name(f)}}, ssd_stats.bytes_of(f));
  }

  using PF = CacheCounters::PerForm;
  auto per_form = [&](const char* name, const char* help, std::atomic<uint64_t> PF::*ram,
                      std::atomic<uint64_t> PF::*ssd_f, std::atomic<uint64_t> PF::*shared,
                      std::atomic<uint64_t> PF::*miss) {
    p.family(name, "counter", help);
    for (size_t f = 0; f < kForms; f++) {
      const char* form = form_name(static_cast<Form>(f));
      const PF& c = cc.by_form[f];
      p.sample(name, {{"form", form}, {"result", "ram_hit"}}, load(c.*ram));
      p.sample(name, {{"form", form}, {"result", "ssd_hit"}}, load(c.*ssd_f));
      p.sample(name, {{"form", form}, {"result", "shared_hit"}}, load(c.*shared));
      p.sample(name, {{"form", form}, {"result", "miss"}}, load(c.*miss));
    }
  };
  per_form("prepfs_form_requests_total", "Chunk requests per form, by where they were answered.", &PF::ram_hits,
           &PF::ssd_hits, &PF::shared_hits, &PF::misses);
  per_form("prepfs_form_bytes_total", "Chunk bytes per form, by where they were answered.", &PF::ram_hit_bytes,
           &PF::ssd_hit_bytes, &PF::shared_hit_bytes, &PF::miss_bytes);

  auto counter = [&](const char* name, const char* help, uint64_t v) {
    p.family(name, "counter", help);
    p.sample(name, {}, v);
  };
  auto gauge = [&](const char* name, const char* help, uint64_t v) {
    p.family(name, "gauge", help);
    p.sample(name, {}, v);
  };
  counter("prepfs_cache_fills_total", "Misses of both tiers that fetched or rendered the chunk.", load(cc.fills));
  counter("prepfs_cache_fill_errors_total", "Fills that failed.", load(cc.fill_errors));
  counter("prepfs_cache_joined_total", "Requests that waited on a fill already in flight.", load(cc.joined));
  gauge("prepfs_ssd_write_queue_bytes", "Bytes waiting in the SSD tier's write queue.", ssd ? ssd->queued_bytes() : 0);
  gauge("prepfs_ssd_write_queue_entries", "Chunks waiting in the SSD tier's write queue.",
        uint64_t(ssd ? ssd->queued_jobs() : 0));

  const SourceCounters& sc = source.counters();
  counter("prepfs_source_reads_total", "Read requests sent to the source.", load(sc.reads));
  counter("prepfs_source_bytes_total", "Bytes fetched from the source.", load(sc.bytes));
  counter("prepfs_source_errors_total", "Failed source reads.", load(sc.errors));
  counter("prepfs_source_opens_total", "Source files opened.", load(sc.opens));
  p.histogram_seconds("prepfs_source_read_seconds", "Latency of successful source reads.", sc.read_latency);

  const ViewCounters& fc = s.views;
  counter("prepfs_fs_reads_total", "Read requests answered by the raw and decoded views.", load(fc.reads));
  counter("prepfs_fs_read_bytes_total", "Bytes returned by those reads.", load(fc.read_bytes));
  counter("prepfs_fs_read_errors_total", "Reads answered with an error.", load(fc.read_errors));
  counter("prepfs_augmented_opens_total", "Opens of augmented/ files.", load(fc.augmented_opens));
  counter("prepfs_augmented_reads_total", "Read requests that reached augmented/ (not answered by the page cache).",
          load(fc.augmented_reads));
  counter("prepfs_augmented_page_cache_opens_total", "Opens of augmented/ that read through the kernel's page cache.",
          load(fc.augmented_page_cache_opens));
  counter("prepfs_augmented_page_invalidations_total",
          "Opens of augmented/ that had the kernel drop the file's older pages.",
          load(fc.augmented_page_invalidations));
  counter("prepfs_augmented_unheld_opens_total",
          "Opens of augmented/ past the bytes open handles may hold: their reads render the variant again.",
          load(fc.augmented_unheld_opens));
  counter("prepfs_fs_revalidations_total", "Files revalidated against the source (metadata_ttl).",
          load(fc.revalidations));

  const RenderCounters& rc = s.renders;
  p.family("prepfs_transform_renders_total", "counter", "Samples rendered by the transforms, by kind.");
  p.sample("prepfs_transform_renders_total", {{"kind", "decoded"}}, load(rc.decoded));
  p.sample("prepfs_transform_renders_total", {{"kind", "augmented"}}, load(rc.augmented));
  p.sample("prepfs_transform_renders_total", {{"kind", "augmented_from_decoded"}}, load(rc.from_decoded));
  p.sample("prepfs_transform_renders_total", {{"kind", "augmented_stopped_below_crop"}}, load(rc.stopped_below_crop));
  counter("prepfs_transform_errors_total", "Files that could not be decoded or augmented.", load(rc.errors));
  p.family("prepfs_transform_cpu_seconds_total", "counter", "Thread CPU time spent in decode and augment.");
  p.sample("prepfs_transform_cpu_seconds_total", {}, double(load(rc.cpu_ns)) / 1e9);
  counter("prepfs_transform_cpu_waits_total", "Renders that queued for a cpu slot (-o cpu=).", load(rc.waits));
  p.family("prepfs_transform_cpu_wait_seconds_total", "counter",
           "Wall time renders waited for a cpu slot: the readers' stall more slots would remove (cpu=auto).");
  p.sample("prepfs_transform_cpu_wait_seconds_total", {}, double(load(rc.cpu_wait_ns)) / 1e9);
  p.family("prepfs_transform_slot_busy_seconds_total", "counter", "Wall time cpu slots were held by renders.");
  p.sample("prepfs_transform_slot_busy_seconds_total", {}, double(load(rc.slot_busy_ns)) / 1e9);
  gauge("prepfs_transform_cpu_slots", "Transforms that may run at once now (cpu=; cpu=auto moves it).",
        load(rc.cpu_slots));

  gauge("prepfs_index_entries", "Entries in the metadata index.", s.tree.size());
  gauge("prepfs_index_files", "Regular files in the metadata index.", s.tree.file_count());
  if (s.prefetch) {
    const PrefetchCounters& pc = *s.prefetch;
    counter("prepfs_prefetch_samples_total", "Samples fetched or rendered ahead of their read (published orders).",
            load(pc.prefetched));
    counter("prepfs_prefetch_hits_total", "Reads that took a staged prefetch (a prefetch RAM keeps counts as a RAM hit).", load(pc.hits));
    counter("prepfs_prefetch_late_total", "Reads that waited for a prefetch still in flight.", load(pc.late));
    counter("prepfs_prefetch_wasted_total", "Prefetched entries dropped before any read took them.", load(pc.wasted));
    counter("prepfs_prefetch_bytes_total", "Bytes prefetched.", load(pc.bytes));
  }
  if (s.render_ahead) {
    const RenderAheadCounters& a = *s.render_ahead;
    p.family("prepfs_render_ahead_total", "counter",
             "Variants rendered ahead of their open with no order published, by outcome: rendered, then used (an "
             "open took it), late (its open came during the render), wasted (dropped unread); skipped: serves not "
             "followed by one.");
    p.sample("prepfs_render_ahead_total", {{"outcome", "rendered"}}, load(a.rendered));
    p.sample("prepfs_render_ahead_total", {{"outcome", "used"}}, load(a.used));
    p.sample("prepfs_render_ahead_total", {{"outcome", "late"}}, load(a.late));
    p.sample("prepfs_render_ahead_total", {{"outcome", "wasted"}}, load(a.wasted));
    p.sample("prepfs_render_ahead_total", {{"outcome", "skipped"}}, load(a.skipped));
    counter("prepfs_render_ahead_bytes_total", "Bytes rendered ahead (no order published).", load(a.bytes));
  }
  if (s.jobs) {
    gauge("prepfs_jobs", "Jobs with a published order.", s.jobs->jobs().size());
    uint64_t pending = 0;
    for (const JobStatus& j : s.jobs->jobs()) pending += j.pending;
    gauge("prepfs_jobs_pending_accesses", "Published accesses not read yet, over all jobs.", pending);
  }
  if (cache.shared()) shared_metrics(p, *cache.shared());
  if (profiler) profile_gauges(p, profiler->profile());
  return p.str();
}

}  // namespace prepfs
