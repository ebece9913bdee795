// The sample read path without the Daemon (placer, renderer, store, view counters) over a given
// source, tree and cache: for unit tests of the views, the store and the placement.
#pragma once

#include "prepfs/cache/tier_manager.h"
#include "prepfs/core/data_fs.h"
#include "prepfs/core/invalidations.h"
#include "prepfs/index/sample_shapes.h"
#include "prepfs/partition/placer.h"
#include "prepfs/store/renderer.h"
#include "prepfs/store/sample_store.h"
#include "prepfs/transform/pipeline_spec.h"

namespace prepfs::test {

inline RenderConfig default_render_config() {
  RenderConfig rc;
  rc.shapes.spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
  rc.cpu = 2;
  return rc;
}

struct ReadPath {
  RenderCounters renders;
  ViewCounters views;
  Invalidations invalidations;
  RenderConfig config;
  Placer placer;
  Renderer renderer;
  SampleStore store;

  ReadPath(Source& source, Tree& tree, TierManager& cache, RenderConfig rc = default_render_config())
      : config(std::move(rc)),
        placer(tree, config.shapes),
        renderer(config, renders),
        store(source, tree, cache, placer, renderer) {}

  // raw/ (and decoded/ with image_views) over this read path.
  std::unique_ptr<DataFs> data_fs(Tree& tree, Source& source, DataFsConfig cfg = {}) {
    return std::make_unique<DataFs>(tree, source, store, views, invalidations, cfg);
  }
};

}  // namespace prepfs::test
