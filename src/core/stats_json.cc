#include "prepfs/core/stats_json.h"

#include <fmt/format.h>

namespace prepfs {
namespace {

std::string tier_json(const TierCounters& c, uint64_t entries, uint64_t bytes, uint64_t budget,
                      const uint64_t (&form_bytes)[kFormCount]) {
  return fmt::format(
      R"({{"hits": {}, "misses": {}, "hit_bytes": {}, "inserts": {}, "evictions": {}, "rejected": {}, )"
      R"("corrupt": {}, "write_errors": {}, "entries": {}, "bytes": {}, "budget": {}, )"
      R"("bytes_by_form": {{"raw": {}, "decoded": {}, "augmented": {}}}}})",
      load(c.hits), load(c.misses), load(c.hit_bytes), load(c.inserts), load(c.evictions),
      load(c.rejected), load(c.corrupt), load(c.write_errors), entries, bytes, budget,
      form_bytes[0], form_bytes[1], form_bytes[2]);
}


}  // namespace

std::string render_stats_json(TierManager& cache, Source& source, const DataFs& fs, const SampleRenderer* renderer) {
  const CacheCounters& cc = cache.counters();
  uint64_t ram_forms[kFormCount], ssd_forms[kFormCount] = {0, 0, 0};
  for (int f = 0; f < kFormCount; f++) {
    ram_forms[f] = cache.ram().bytes(static_cast<Form>(f));
    if (cache.ssd()) ssd_forms[f] = cache.ssd()->bytes(static_cast<Form>(f));
  }
  SsdTier* ssd = cache.ssd();
  const SourceCounters& sc = source.counters();
  const DataFsCounters& fc = fs.counters();
  RenderCounters none;
  const RenderCounters& rc = renderer ? renderer->counters() : none;
  return fmt::format(
      "{{\n"
      R"(  "source": {{"reads": {}, "bytes": {}, "opens": {}, "errors": {}, "read_seconds": {:.6f}}},)" "\n"
      R"(  "ram": {},)" "\n"
      R"(  "ssd": {},)" "\n"
      R"(  "cache": {{"fills": {}, "fill_errors": {}, "joined": {}}},)" "\n"
      R"(  "fs": {{"reads": {}, "read_bytes": {}, "read_errors": {}, "revalidations": {}, "changed_files": {}}},)" "\n"
      R"(  "transform": {{"decoded": {}, "augmented": {}, "augmented_from_decoded": {}, "errors": {}, "cpu_seconds": {:.6f}, "cpu_waits": {}}},)" "\n"
      R"(  "index": {{"entries": {}, "files": {}, "images": {}, "memory_bytes": {}}})" "\n"
      "}}\n",
      load(sc.reads), load(sc.bytes), load(sc.opens), load(sc.errors), double(load(sc.read_ns)) / 1e9,
      tier_json(cc.ram, cache.ram().entries(), cache.ram().bytes(), cache.ram().budget(), ram_forms),
      tier_json(cc.ssd, ssd ? ssd->entries() : 0, ssd ? ssd->bytes() : 0, ssd ? ssd->budget() : 0, ssd_forms),
      load(cc.fills), load(cc.fill_errors), load(cc.joined),
      load(fc.reads), load(fc.read_bytes), load(fc.read_errors), load(fc.revalidations), load(fc.changed_files),
      load(rc.decoded), load(rc.augmented), load(rc.from_decoded), load(rc.errors), double(load(rc.cpu_ns)) / 1e9,
      load(rc.waits),
      fs.tree().size(), fs.tree().file_count(), fs.tree().image_count(), fs.tree().memory_bytes());
}

}  // namespace prepfs
