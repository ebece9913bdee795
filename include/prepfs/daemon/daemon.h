// The whole daemon but its front doors, assembled from Options: the source, the cache directory
// (locked), the metadata index, the tiers, the sample store and its renderer, the three
// namespaces (main tree, augmented/, .prepfs/), partition control (profiler, placer, planner) and
// observability. Each part gets its collaborators in its constructor; nothing is wired after.
// A unit test constructs a Daemon over a temporary directory and reads raw, decoded and
// augmented bytes through its Filesystems with no FUSE; fuse/ mounts them, http/ serves metrics.
#pragma once

#include <memory>
#include <string>

#include "prepfs/common/options.h"
#include "prepfs/common/stats.h"
#include "prepfs/core/filesystem.h"
#include "prepfs/core/invalidations.h"

namespace prepfs {

class TierManager;
class SampleStore;
class Renderer;
class Staging;
class Placer;
class Planner;
class Profiler;
class RenderAhead;
class Source;
class Tree;

class Daemon {
 public:
  // Validates everything the user gave (each problem becomes one clear Error) and builds every
  // part; the profiler starts ticking. Does not mount anything.
  explicit Daemon(const Options& opts);
  // The option checks the constructor makes before it touches anything (a bad augment= spec):
  // Error(EINVAL) with the reason. For the command line, to report usage errors as such.
  static void check_options(const Options& opts);
  ~Daemon();  // stops background work and lands queued SSD writes
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The three namespaces a front door serves: /, raw/, decoded/ (no per-open state); augmented/
  // (a variant per open); .prepfs/ (control files, a snapshot per open).
  Filesystem& main_fs();
  Filesystem& augmented_fs();
  Filesystem& control_fs();
  // Inodes of the main tree whose kernel pages must be dropped (drained by the front door).
  Invalidations& invalidations();
  Invalidations& augmented_invalidations();  // augmented/'s inodes (their sizes follow the header)
  // The front door times its read replies into these (the profiler's copy bandwidth).
  ReplyCounters& replies();

  std::string metrics_text();
  std::string stats_json();
  // .prepfs/evict: every cached entry goes, queued SSD writes included.
  void evict_all();
  // Stops background work (the profiler's ticks and re-plans) and lands queued SSD writes.
  // Safe to call twice; the namespaces keep answering from what is cached.
  void stop();

  std::string summary() const;  // one line for the log and sd_notify STATUS=
  const Options& options() const;

  // The parts, for tests and tools.
  TierManager& cache();
  SampleStore& store();
  Renderer& renderer();
  Staging& staging();
  Planner& planner();
  Placer& placer();
  Profiler& profiler();
  const Tree& tree() const;
  const RenderCounters& renders() const;
  const ViewCounters& views() const;
  RenderAhead* render_ahead();  // null with render_ahead=0
  const RenderAheadCounters& render_ahead_counters() const;
  const PrefetchCounters& prefetch_counters() const;
  Source& source();

 private:
  struct Parts;
  std::unique_ptr<Parts> p_;
};

}  // namespace prepfs
