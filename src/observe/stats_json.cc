#include "prepfs/observe/stats_json.h"

#include <fmt/format.h>

#include "prepfs/common/json_text.h"

namespace prepfs {
namespace {

std::string tier_json(const TierCounters& c, const TierStats& t) {
  return fmt::format(R"({{"hits": {}, "misses": {}, "hit_bytes": {}, "inserts": {}, "evictions": {}, "rejected": {}, )"
                     R"("corrupt": {}, "write_errors": {}, "entries": {}, "bytes": {}, "budget": {}, )"
                     R"("bytes_by_form": {{"raw": {}, "decoded": {}, "augmented": {}}}}})",
                     load(c.hits), load(c.misses), load(c.hit_bytes), load(c.inserts), load(c.evictions),
                     load(c.rejected), load(c.corrupt), load(c.write_errors), t.entries, t.bytes, t.budget,
                     t.bytes_of(Form::raw), t.bytes_of(Form::decoded), t.bytes_of(Form::augmented));
}

std::string names_json(const Profile& p, bool priors) {
  std::string out = "[";
  for (const ProfileNote& n : p.notes) {
    if (n.prior != priors) continue;
    if (out.size() > 1) out += ", ";
    out += "\"" + n.input + "\"";  // field names: never need escaping
  }
  return out + "]";
}

// "shared": the tier shared with other nodes, per form, and its servers as last seen.
std::string shared_json(SharedTier* shared) {
  if (!shared) return "";
  const SharedCounters& c = shared->counters();
  std::string forms, by_form, servers;
  for (Form f : kAllForms) {
    if (shared->shares(f)) forms += fmt::format(R"({}"{}")", forms.empty() ? "" : ", ", form_name(f));
    const SharedCounters::PerForm& p = c.by_form[index_of(f)];
    by_form += fmt::format(
        R"({}"{}": {{"hits": {}, "hit_bytes": {}, "misses": {}, "published": {}, "published_bytes": {}, "leases": {}, )"
        R"("lease_waits": {}, "lease_wait_hits": {}, "lease_timeouts": {}, "corrupt": {}, "errors": {}}})",
        f == Form::raw ? "" : ", ", form_name(f), load(p.hits), load(p.hit_bytes), load(p.misses), load(p.published),
        load(p.published_bytes), load(p.leases), load(p.lease_waits), load(p.lease_wait_hits), load(p.lease_timeouts),
        load(p.corrupt), load(p.errors));
  }
  for (const KvServerState& sv : shared->store().servers())
    servers += fmt::format(
        R"({}{{"name": "{}", "up": {}, "failures": {}, "memory_bytes": {}, "extstore_bytes": {}, "used_bytes": {}, )"
        R"("items": {}, "evictions": {}, "item_size_max": {}}})",
        servers.empty() ? "" : ", ", json_escaped(sv.name), sv.up ? "true" : "false", sv.failures, sv.memory_bytes, sv.extstore_bytes,
        sv.used_bytes, sv.items, sv.evictions, sv.item_size_max);
  return fmt::format(R"(,
  "shared": {{"forms": [{}], "gets": {}, "get_seconds": {:.6f}, "by_form": {{{}}}, )"
                     R"("publish_queue": {{"entries": {}, "bytes": {}, "dropped": {}}}, "servers": [{}]}})",
                     forms, load(c.gets), double(load(c.get_ns)) / 1e9, by_form, load(c.publish_queued),
                     load(c.publish_queued_bytes), load(c.publish_dropped), servers);
}

}  // namespace

std::string profile_json(const Profile& p) {
  return fmt::format(
      R"({{"ticks": {}, "samples": {}, "size": {{"raw": {:.6g}, "decoded": {:.6g}, "augmented": {:.6g}}}, )"
      R"("capacity": {{"ram": {}, "ssd": {}}}, )"
      R"("source": {{"latency_s": {:.6g}, "bandwidth_Bps": {:.6g}, "stream_Bps": {:.6g}, "peak_Bps": {:.6g}, "busy_Bps": {:.6g}, )"
      R"("concurrency_in_use": {:.4g}, "concurrency": {}}}, )"
      R"("ssd": {{"read_Bps": {:.6g}, "read_stream_Bps": {:.6g}, "read_peak_Bps": {:.6g}, "write_Bps": {:.6g}}}, )"
      R"("cpu": {{"decode_s": {:.6g}, "augment_s": {:.6g}, "augment_from_jpeg_s": {:.6g}, )"
      R"("augment_from_decoded_s": {:.6g}, "cores": {}}}, )"
      R"("copy_Bps": {:.6g}, "copy_per_thread_Bps": {:.6g}, )"
      R"("views": {{"raw": {:.4f}, "decoded": {:.4f}, "augmented": {:.4f}}}, "view": "{}", "aug_reuse": {}, )"
      R"("priors": {}, "unmeasured": {}}})",
      p.ticks, p.samples, p.size[0], p.size[1], p.size[2], p.ram_capacity, p.ssd_capacity, p.src_latency,
      p.src_bandwidth, p.src_stream_bw, p.src_peak_bw, p.src_busy_bw, p.src_concurrency_in_use, p.src_concurrency,
      p.ssd_read_bw, p.ssd_read_stream_bw, p.ssd_read_peak_bw, p.ssd_write_bw, p.c_dec, p.c_aug, p.c_aug_from_jpeg,
      p.c_aug_from_decoded, p.cores, p.copy_bw, p.copy_call_bw, p.view_share[0], p.view_share[1], p.view_share[2],
      form_name(p.view), p.aug_reuse, names_json(p, true), names_json(p, false));
}

// "prefetch" (what the published orders made the daemon do) and "jobs" (each job's order).
std::string jobs_json(const StatsSources& s) {
  std::string out;
  if (s.prefetch) {
    const PrefetchCounters& p = *s.prefetch;
    out += fmt::format(
        R"(,
  "prefetch": {{"prefetched": {}, "hits": {}, "late": {}, "wasted": {}, "bytes": {}, "max_in_flight": {}, "max_window_bytes": {},
    "slot_waits": {}, "slot_wait_ms": {}, "refetched": {}}})",
        load(p.prefetched), load(p.hits), load(p.late), load(p.wasted), load(p.bytes), load(p.max_in_flight),
        load(p.max_window_bytes), load(p.slot_waits), load(p.slot_wait_ns) / 1'000'000, load(p.refetched));
  }
  if (s.render_ahead) {
    const RenderAheadCounters& a = *s.render_ahead;
    out += fmt::format(
        R"(,
  "render_ahead": {{"rendered": {}, "used": {}, "late": {}, "wasted": {}, "skipped": {}, "bytes": {}}})",
        load(a.rendered), load(a.used), load(a.late), load(a.wasted), load(a.skipped), load(a.bytes));
  }
  if (s.jobs) {
    std::string list;
    for (const JobStatus& j : s.jobs->jobs())
      list += fmt::format(R"({}{{"name": "{}", "published": {}, "consumed": {}, "pending": {}}})",
                          list.empty() ? "" : ", ", j.name, j.published, j.consumed, j.pending);
    out += fmt::format(R"(,
  "jobs": {{"list": [{}], "unexpected_reads": {}}})",
                       list, s.jobs->unexpected_reads());
  }
  return out;
}

std::string render_stats_json(const StatsSources& s) {
  TierManager& cache = s.cache;
  Source& source = s.source;
  const Profiler* profiler = s.profiler;
  const CacheCounters& cc = cache.counters();
  const SourceCounters& sc = source.counters();
  const ViewCounters& fc = s.views;
  const RenderCounters& rc = s.renders;
  const RecentStats recent = cache.ram().recent_stats();
  const SpareStats spare = cache.ssd() ? cache.ssd()->spare_stats() : SpareStats{};
  return fmt::format(
      "{{\n"
      R"(  "source": {{"reads": {}, "bytes": {}, "opens": {}, "errors": {}, "read_seconds": {:.6f}}},)"
      "\n"
      R"(  "ram": {},)"
      "\n"
      R"(  "ssd": {},)"
      "\n"
      R"(  "cache": {{"fills": {}, "fill_errors": {}, "joined": {}, "recent_bytes": {}, "recent_entries": {}, "ssd_spare_bytes": {}, "ssd_spare_entries": {}}},)"
      "\n"
      R"(  "fs": {{"reads": {}, "read_bytes": {}, "read_errors": {}, "revalidations": {}, "changed_files": {}, "augmented_opens": {}, "augmented_reads": {}, "augmented_read_bytes": {}, "augmented_page_cache_opens": {}, "augmented_page_invalidations": {}, "augmented_unheld_opens": {}}},)"
      "\n"
      R"(  "transform": {{"decoded": {}, "augmented": {}, "augmented_from_decoded": {}, "stopped_below_crop": {}, "errors": {}, "cpu_seconds": {:.6f}, "cpu_waits": {}, "cpu_wait_seconds": {:.6f}, "slot_busy_seconds": {:.6f}, "cpu_slots": {}, "memory_waits": {}, "timeouts": {}}},)"
      "\n"
      R"(  "index": {{"entries": {}, "files": {}, "images": {}, "unprobed": {}, "memory_bytes": {}}}{})"
      "\n"
      "}}\n",
      load(sc.reads), load(sc.bytes), load(sc.opens), load(sc.errors), double(load(sc.read_ns)) / 1e9,
      tier_json(cc.ram, cache.stats(Tier::ram)), tier_json(cc.ssd, cache.stats(Tier::ssd)), load(cc.fills),
      load(cc.fill_errors), load(cc.joined), recent.bytes, recent.entries, spare.bytes, spare.entries, load(fc.reads),
      load(fc.read_bytes), load(fc.read_errors), load(fc.revalidations), load(fc.changed_files), load(fc.augmented_opens),
      load(fc.augmented_reads), load(fc.augmented_read_bytes), load(fc.augmented_page_cache_opens),
      load(fc.augmented_page_invalidations), load(fc.augmented_unheld_opens), load(rc.decoded),
      load(rc.augmented), load(rc.from_decoded), load(rc.stopped_below_crop), load(rc.errors), double(load(rc.cpu_ns)) / 1e9, load(rc.waits),
      double(load(rc.cpu_wait_ns)) / 1e9, double(load(rc.slot_busy_ns)) / 1e9, load(rc.cpu_slots),
      load(rc.memory_waits), load(rc.timeouts), s.tree.size(), s.tree.file_count(), s.tree.image_count(),
      s.tree.unprobed_count(), s.tree.memory_bytes(),
      jobs_json(s) + shared_json(cache.shared()) +
          (profiler ? ",\n  \"profile\": " + profile_json(profiler->profile()) : std::string()));
}

}  // namespace prepfs
