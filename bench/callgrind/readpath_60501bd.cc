// Callgrind driver for the read path on the pre-#10 code (old assembly, as mount.cc did it).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sys/stat.h>
#include "prepfs/cache/tier_manager.h"
#include "prepfs/core/augmented_fs.h"
#include "prepfs/core/data_fs.h"
#include "prepfs/core/image_probe.h"
#include "prepfs/core/placer.h"
#include "prepfs/core/planner.h"
#include "prepfs/core/profiler.h"
#include "prepfs/core/sample_renderer.h"
#include "prepfs/core/tree.h"
#include "prepfs/source/posix_source.h"
#include "prepfs/transform/pipeline_spec.h"
using namespace prepfs;

std::vector<uint32_t> images;
__attribute__((noinline)) void cold_augmented_opens(AugmentedFs& aug) {
  for (uint32_t id : images) { auto r = aug.open(id + 1, 0); aug.release(id + 1, r.fh); }
}
__attribute__((noinline)) void fill_raw(DataFs& fs) {
  for (uint32_t id : images) { auto s = fs.read(DataFs::raw_ino(id), 0, 0, 131072); if (s.empty()) abort(); }
}
__attribute__((noinline)) void warm_raw_reads(DataFs& fs, int rounds) {
  for (int k = 0; k < rounds; k++)
    for (uint32_t id : images) { auto s = fs.read(DataFs::raw_ino(id), 0, 0, 131072); if (s.empty()) abort(); }
}
int main(int argc, char** argv) {
  PosixSource src(argv[1]);
  Tree tree = Tree::scan(src);
  probe_images(tree, src, 1);
  for (uint32_t id = 0; id < tree.size(); id++) if (tree.dims(id).is_image()) images.push_back(id);
  CacheConfig cc; cc.ram_bytes = 1ull << 30; cc.ssd_bytes = 0;
  TierManager cache(cc);
  RenderConfig rc; rc.spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec); rc.cpu = 1;
  SampleRenderer renderer(src, tree, cache, rc);
  DataFs fs(src, tree, cache, &renderer, DataFsConfig{});
  AugmentedFs aug(tree, renderer, 1, 86400);
  ReplyCounters replies;
  Profiler profiler(ProfilerSources{tree, src, cache, renderer, fs.counters(), aug.counters(), replies, 64, 1});
  Placer placer(tree);
  renderer.set_placer(&placer); fs.set_placer(&placer);
  PlannerConfig pc; if (argc > 2) { pc.fixed = true; pc.fixed_shares[0] = {1, 0, 0}; }
  Planner planner(pc, [&](std::string* n) { return profiler.inputs(n); }, placer, cache,
                  [&](uint32_t node, Form f) { renderer.forget(node, f, 0); });
  planner.plan_now("driver");
  fprintf(stderr, "%zu images; plan: %s\n", images.size(), planner.report_text().substr(0, 400).c_str());
  cold_augmented_opens(aug);
  fill_raw(fs);   // fills raw chunks where admitted
  warm_raw_reads(fs, 10);
  return 0;
}
