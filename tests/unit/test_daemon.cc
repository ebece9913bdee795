// The whole daemon without FUSE: a Daemon built from Options over a temporary directory, read
// through the same Filesystem interfaces the FUSE adaptor calls, for each of the three views.
#include "prepfs/daemon/daemon.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/common/error.h"
#include "prepfs/core/augmented_fs.h"
#include "prepfs/core/file_revalidator.h"
#include "prepfs/index/image_probe.h"
#include "prepfs/index/tree.h"
#include "prepfs/partition/planner.h"
#include "prepfs/partition/profiler.h"
#include "prepfs/source/posix_source.h"
#include "prepfs/store/header_prober.h"
#include "prepfs/store/render_ahead.h"
#include "prepfs/store/render_memory.h"
#include "prepfs/store/renderer.h"
#include "prepfs/store/sample_store.h"
#include "prepfs/store/staging.h"
#include "prepfs/store/verified_files.h"
#include "prepfs/transform/augment.h"
#include "prepfs/transform/jpeg_header.h"
#include "prepfs/transform/pipeline_spec.h"
#include "prepfs/transform/render.h"
#include "prepfs/transform/rng.h"
#include "read_path.h"
#include "temp_dir.h"
#include "transform/test_util.h"

namespace prepfs {
namespace {

namespace xt = transform::testing;

// A small dataset: three RGB JPEGs and a grayscale one in a class folder, and a label file.
struct Rig {
  test::TempDir dir;
  Options opts;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> images;  // source path, JPEG bytes

  struct Size {
    int width, height, channels;
  };
  static constexpr Size kSmall[] = {{64, 48, 3}, {50, 75, 3}, {33, 17, 3}, {40, 40, 1}};
  // ImageNet-like: decoding and augmenting them costs more CPU than copying the results.
  static constexpr Size kPhotos[] = {{500, 375, 3}, {375, 500, 3}, {500, 333, 3}, {320, 240, 1}};

  explicit Rig(const std::string& options = "", const Size (&sizes)[4] = kSmall) {
    for (int i = 0; i < 4; i++) {
      auto [w, h, c] = sizes[i];
      std::vector<uint8_t> jpeg = xt::encode_jpeg(xt::synthetic_samples(w, h, c, 7 + i), w, h, c);
      std::string path = "cls/img" + std::to_string(i) + ".jpg";
      dir.write("src/" + path, std::string(jpeg.begin(), jpeg.end()));
      images.push_back({path, jpeg});
    }
    dir.write("src/labels.txt", "cls 0\n");
    opts.source = dir / "src";
    opts.mountpoint = dir / "mnt";  // never mounted: the Daemon does not need it
    opts.ssd_dir = dir / "cache";
    opts.ram_bytes = 64 << 20;
    opts.ssd_bytes = 64 << 20;
    if (!options.empty()) apply_option_list(opts, options);
    finalize_options(opts);
  }
};

// n bytes of filler, for entries a case puts in a tier or the staging itself.
ChunkRef filler(size_t n) {
  auto c = Chunk::allocate(n);
  std::memset(c->mutable_data(), 'x', n);
  return ChunkRef(c);
}

// Walks a path from a Filesystem's root inode, as the kernel's lookups would.
uint64_t walk(Filesystem& fs, uint64_t root, const std::string& path) {
  uint64_t ino = root;
  for (size_t pos = 0; pos < path.size();) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    ino = fs.lookup(ino, path.substr(pos, slash - pos)).ino;
    pos = slash + 1;
  }
  return ino;
}

// Publishes an order through .prepfs/order, as a job writes it.
void publish_order(Daemon& d, const std::string& order) {
  Filesystem& control = d.control_fs();
  const uint64_t ino = walk(control, 1, "order");
  OpenReply w = control.open(ino, O_WRONLY);
  control.write(ino, w.fh, 0, order);
  control.release(ino, w.fh);
}

// open, read in kernel-sized requests until EOF, release: one open of one file. A control file is
// rendered at open (its handle reads that snapshot, direct_io) and again by a stat, so counters that
// move in between change its size: `exact_size` false skips the size check for those.
std::string read_file(Filesystem& fs, uint64_t ino, bool exact_size = true) {
  OpenReply r = fs.open(ino, O_RDONLY);
  const uint64_t size = fs.getattr(ino).size;
  std::string out;
  for (uint64_t off = 0;;) {
    std::vector<Slice> slices = fs.read(ino, r.fh, off, 128 << 10);
    if (slices.empty()) break;
    for (const Slice& s : slices) out.append(s.data, s.len), off += s.len;
  }
  fs.release(ino, r.fh);
  if (exact_size) {
    EXPECT_EQ(out.size(), size) << "stat() promised another size";
  }
  return out;
}

std::string str(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

transform::AugmentOptions augment_options(const Options& o) {
  transform::AugmentOptions a;
  a.limits.max_pixels = o.max_pixels;
  a.fast.dct_scale = o.fast_paths;
  a.fast.crop_decode = o.crop_decode;
  return a;
}

TEST(Daemon, ServesRawDecodedAndAugmentedWithoutFuse) {
  Rig rig;
  Daemon d(rig.opts);
  const auto spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
  for (const auto& [path, jpeg] : rig.images) {
    SCOPED_TRACE(path);
    // raw/: the source's bytes.
    EXPECT_EQ(read_file(d.main_fs(), walk(d.main_fs(), 1, "raw/" + path)), str(jpeg));
    // decoded/: x.jpg as x.ppm, PIL-equal pixels (the transform layer proves the equality).
    std::string ppm = path.substr(0, path.size() - 4) + ".ppm";
    EXPECT_EQ(read_file(d.main_fs(), walk(d.main_fs(), 1, "decoded/" + ppm)),
              str(transform::render_decoded(jpeg, transform::OutputFormat::kPpm)));
    // augmented/ (its own namespace, mounted at MNT/augmented): open k serves variant k.
    const uint64_t aug = walk(d.augmented_fs(), 1, ppm);
    for (uint32_t k = 0; k < 2; k++) {
      transform::Rng rng = transform::Rng::for_variant(rig.opts.seed, path, k);
      EXPECT_EQ(
          read_file(d.augmented_fs(), aug),
          str(transform::render_augmented(jpeg, spec, rng, transform::OutputFormat::kPpm, augment_options(rig.opts))))
          << "variant " << k;
    }
  }
  // The label file is in raw/ only.
  EXPECT_EQ(read_file(d.main_fs(), walk(d.main_fs(), 1, "raw/labels.txt")), "cls 0\n");
  EXPECT_THROW(walk(d.main_fs(), 1, "decoded/labels.ppm"), Error);
  // The control files answer too.
  const std::string stats = read_file(d.control_fs(), walk(d.control_fs(), 1, "stats"), false);
  EXPECT_NE(stats.find("\"source\""), std::string::npos) << stats;
  EXPECT_NE(read_file(d.control_fs(), walk(d.control_fs(), 1, "plan"), false).find("partition="), std::string::npos);
}

TEST(Daemon, ARestartOverTheSameCacheDirectoryServesFromTheSsdTier) {
  Rig rig("probe=mount,partition=fixed:0/0/0/100/0/0");  // every raw sample on the SSD, nothing in RAM
  const std::string path = "raw/" + rig.images[0].first;
  {
    Daemon d(rig.opts);
    EXPECT_EQ(read_file(d.main_fs(), walk(d.main_fs(), 1, path)), str(rig.images[0].second));
  }  // the destructor lands the queued SSD write
  Daemon again(rig.opts);
  const uint64_t before = load(again.source().counters().bytes);
  EXPECT_EQ(read_file(again.main_fs(), walk(again.main_fs(), 1, path)), str(rig.images[0].second));
  EXPECT_EQ(load(again.source().counters().bytes), before) << "the restart fetched from the source again";
  EXPECT_EQ(load(again.cache().counters().ssd.hits), 1u);
}

// Variant k of a file is f(seed, path, k): a restart with another seed over the same cache
// directory serves that seed's variants, not the ones the SSD kept from the last. The seed was
// not part of the key, so the old variants were served as the new seed's.
TEST(Daemon, ARestartWithAnotherSeedServesItsOwnVariantsNotTheCachedOnes) {
  // Every augmented variant on the SSD, nothing in RAM; a variant serves 4 opens, so it is kept.
  Rig rig("probe=mount,aug_reuse=4,render_ahead=0,seed=7,partition=fixed:0/0/0/0/0/100");
  const auto& [path, jpeg] = rig.images[0];
  const std::string ppm = path.substr(0, path.size() - 4) + ".ppm";
  const auto spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
  auto variant0 = [&](uint64_t seed) {
    transform::Rng rng = transform::Rng::for_variant(seed, path, 0);
    return str(transform::render_augmented(jpeg, spec, rng, transform::OutputFormat::kPpm, augment_options(rig.opts)));
  };
  ASSERT_NE(variant0(7), variant0(8));
  {
    Daemon d(rig.opts);
    EXPECT_EQ(read_file(d.augmented_fs(), walk(d.augmented_fs(), 1, ppm)), variant0(7));
    ASSERT_TRUE(d.cache().flush());
    ASSERT_GT(d.cache().stats(Tier::ssd).bytes_of(Form::augmented), 0u) << "nothing for the restart to find";
  }
  {  // The premise: a restart with the same seed serves the kept variant from the SSD.
    Daemon same(rig.opts);
    EXPECT_EQ(read_file(same.augmented_fs(), walk(same.augmented_fs(), 1, ppm)), variant0(7));
    ASSERT_EQ(load(same.cache().counters().ssd.hits), 1u) << "the kept variant was not found again";
  }
  rig.opts.seed = 8;
  Daemon again(rig.opts);
  EXPECT_EQ(read_file(again.augmented_fs(), walk(again.augmented_fs(), 1, ppm)), variant0(8));
  EXPECT_EQ(load(again.cache().counters().ssd.hits), 0u);
}

// Handles hold their variants' bytes up to transform_mem between them (64M here). A reader that
// keeps more files open used to make the daemon hold every variant it had opened: memory without
// a bound. Past the allowance a handle keeps only what defines its variant, and its reads render
// it again: every handle must still read exactly the variant its open was given (compared with a
// daemon of the same seed that opens and closes one at a time), and the allowance comes back at
// release.
TEST(Daemon, HandlesPastTheHeldBytesAllowanceReadTheirOwnVariantRenderedAgain) {
  const std::string options = "seed=3,transform_mem=64M,render_ahead=0";
  Rig rig(options), ref_rig(options);
  Daemon d(rig.opts), ref(ref_rig.opts);
  auto& fs = dynamic_cast<AugmentedFs&>(d.augmented_fs());
  const uint64_t aug = walk(fs, 1, "cls/img1.ppm"), ref_aug = walk(ref.augmented_fs(), 1, "cls/img1.ppm");
  const uint64_t size = fs.getattr(aug).size;
  const size_t held = (64u << 20) / size, opens = held + 6;
  std::vector<uint64_t> handles;
  for (size_t i = 0; i < opens; i++) handles.push_back(fs.open(aug, O_RDONLY).fh);
  EXPECT_EQ(load(d.views().augmented_unheld_opens), opens - held);
  EXPECT_LE(fs.held_bytes(), uint64_t(64) << 20);
  const uint64_t renders = load(d.renders().augmented);
  for (size_t i = 0; i < opens; i++) {
    std::string got;
    for (uint64_t off = 0;;) {  // in small reads: an unheld handle renders on each
      std::vector<Slice> slices = fs.read(aug, handles[i], off, 64 << 10);
      if (slices.empty()) break;
      for (const Slice& sl : slices) got.append(sl.data, sl.len), off += sl.len;
    }
    ASSERT_EQ(got, read_file(ref.augmented_fs(), ref_aug)) << "open " << i << " of " << opens;
  }
  EXPECT_GT(load(d.renders().augmented), renders) << "the unheld handles' reads rendered nothing";
  for (uint64_t fh : handles) fs.release(aug, fh);
  EXPECT_EQ(fs.held_bytes(), 0u);
  const uint64_t unheld = load(d.views().augmented_unheld_opens);
  fs.release(aug, fs.open(aug, O_RDONLY).fh);
  EXPECT_EQ(load(d.views().augmented_unheld_opens), unheld) << "the allowance did not come back";
}

// An unheld handle renders its variant from the file as its open saw it. The file rewritten in
// between: its reads give that same variant (from pixels still cached) or EIO, never the new
// file's variant, and never a mix.
TEST(Daemon, AnUnheldHandleNeverReadsAVariantOfTheFileRewrittenSinceItsOpen) {
  // metadata_ttl=0: the stat after the rewrite moves the index to the new version, as a
  // revalidating mount would; the handle must keep to the version its open rendered.
  const std::string options = "seed=3,transform_mem=64M,render_ahead=0,metadata_ttl=0";
  Rig rig(options), old_rig(options), new_rig(options);
  const Rig::Size bigger{80, 60, 3};
  const std::vector<uint8_t> rewritten =
      xt::encode_jpeg(xt::synthetic_samples(bigger.width, bigger.height, 3, 99), bigger.width, bigger.height, 3);
  new_rig.dir.write("src/cls/img0.jpg", str(rewritten));
  Daemon d(rig.opts), old_ref(old_rig.opts), new_ref(new_rig.opts);
  auto& fs = dynamic_cast<AugmentedFs&>(d.augmented_fs());
  const uint64_t filler = walk(fs, 1, "cls/img1.ppm"), victim = walk(fs, 1, "cls/img0.ppm");
  std::vector<uint64_t> held;
  while (fs.held_bytes() + fs.getattr(filler).size <= (uint64_t(64) << 20))
    held.push_back(fs.open(filler, O_RDONLY).fh);
  const uint64_t unheld = load(d.views().augmented_unheld_opens);
  const uint64_t fh = fs.open(victim, O_RDONLY).fh;  // variant 0 of img0
  ASSERT_EQ(load(d.views().augmented_unheld_opens), unheld + 1);
  rig.dir.write("src/cls/img0.jpg", str(rewritten));
  fs.getattr(victim);  // revalidates: the index now holds the new version
  const std::string before = read_file(old_ref.augmented_fs(), walk(old_ref.augmented_fs(), 1, "cls/img0.ppm"));
  const std::string after = read_file(new_ref.augmented_fs(), walk(new_ref.augmented_fs(), 1, "cls/img0.ppm"));
  ASSERT_NE(before, after);
  std::string got;
  int err = 0;
  try {
    for (uint64_t off = 0;;) {
      std::vector<Slice> slices = fs.read(victim, fh, off, 64 << 10);
      if (slices.empty()) break;
      for (const Slice& sl : slices) got.append(sl.data, sl.len), off += sl.len;
    }
  } catch (const Error& e) {
    err = e.err();
  }
  if (err != 0)
    EXPECT_EQ(err, EIO);
  else
    EXPECT_EQ(got, before) << "an unheld handle read another version's variant";
  fs.release(victim, fh);
  for (uint64_t h : held) fs.release(filler, h);
}

// Files that are not samples are admitted as read, and the plan leaves room for their bytes. A
// lazy first mount knows only the headers it read at mount (64 here of 105 files); once every
// header is read the plan counts them all. It kept the count from mount for good.
TEST(Daemon, ThePlanOnACompleteIndexLeavesRoomForEveryFileThatIsNoSample) {
  Rig rig("probe=lazy");
  constexpr int kTexts = 100;
  for (int i = 0; i < kTexts; i++) rig.dir.write("src/meta/t" + std::to_string(i) + ".txt", std::string(65536, 'm'));
  Daemon d(rig.opts);
  auto other_bytes = [&] {
    const std::string json = d.planner().report_json();
    const size_t at = json.find("\"other_bytes\": ");
    return at == std::string::npos ? -1.0 : std::stod(json.substr(at + 15));
  };
  EXPECT_LT(other_bytes(), kTexts * 65536.0) << "the mount read every header: nothing to test";
  read_file(d.control_fs(), walk(d.control_fs(), 1, "samples"), false);  // reads every header
  // The profiler's next tick (each second) plans on the complete index.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (other_bytes() < kTexts * 65536.0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GE(other_bytes(), kTexts * 65536.0);
}

TEST(Daemon, TwoDaemonsCannotShareOneCacheDirectory) {
  Rig rig;
  Daemon first(rig.opts);
  try {
    Daemon second(rig.opts);
    FAIL() << "a second daemon took the same cache directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EBUSY);
  }
}

// The last serve of a variant (every open with aug_reuse=1) is never admitted: no insert, no
// eviction, no queued SSD write in either tier. Both where the placement keeps the sample's
// augmented variants (they would be admitted, and erased right after) and where it keeps its
// decoded pixels (variants render from them).
void expect_last_serves_leave_tiers_untouched(const std::string& partition, bool from_decoded) {
  SCOPED_TRACE(partition);
  // The first plan sees every sample; no render ahead (its renders would add to the counts).
  Rig rig("probe=mount,aug_reuse=1,render_ahead=0,partition=" + partition);
  Daemon d(rig.opts);
  const std::string ppm = "cls/img0.ppm";
  if (from_decoded) read_file(d.main_fs(), walk(d.main_fs(), 1, "decoded/" + ppm));  // pixels now cached
  TierManager& cache = d.cache();
  cache.flush();
  struct Snapshot {
    uint64_t ram_inserts, ram_evictions, ram_rejected, ssd_inserts, ssd_evictions, ssd_rejected;
    TierStats ram, ssd;
    size_t queued;
  };
  auto snapshot = [&] {
    const CacheCounters& c = cache.counters();
    return Snapshot{load(c.ram.inserts),    load(c.ram.evictions),  load(c.ram.rejected),
                    load(c.ssd.inserts),    load(c.ssd.evictions),  load(c.ssd.rejected),
                    cache.stats(Tier::ram), cache.stats(Tier::ssd), cache.ssd()->queued_jobs()};
  };
  const Snapshot before = snapshot();
  const uint64_t aug = walk(d.augmented_fs(), 1, ppm);
  for (int open = 0; open < 3; open++) {
    OpenReply r = d.augmented_fs().open(aug, O_RDONLY);  // variants 0, 1, 2: each its last serve
    const Snapshot now = snapshot();
    EXPECT_EQ(now.ram_inserts, before.ram_inserts);
    EXPECT_EQ(now.ram_evictions, before.ram_evictions);
    EXPECT_EQ(now.ram_rejected, before.ram_rejected);
    EXPECT_EQ(now.ssd_inserts, before.ssd_inserts);
    EXPECT_EQ(now.ssd_evictions, before.ssd_evictions);
    EXPECT_EQ(now.ssd_rejected, before.ssd_rejected);
    EXPECT_EQ(now.queued, 0u);
    EXPECT_EQ(now.ram.entries, before.ram.entries);
    EXPECT_EQ(now.ssd.entries, before.ssd.entries);
    EXPECT_EQ(now.ram.bytes_of(Form::augmented) + now.ssd.bytes_of(Form::augmented), 0u);
    d.augmented_fs().release(aug, r.fh);
  }
  cache.flush();
  EXPECT_EQ(snapshot().ssd_inserts, before.ssd_inserts);
  EXPECT_EQ(load(d.renders().augmented), 3u);
  EXPECT_EQ(load(d.renders().from_decoded), from_decoded ? 3u : 0u);
}

TEST(Daemon, TheLastServeOfAVariantLeavesBothTiersUntouched) {
  expect_last_serves_leave_tiers_untouched("fixed:0/0/100", false);  // variants placed in both tiers
  expect_last_serves_leave_tiers_untouched("fixed:0/100/0", true);   // decoded pixels placed
}

// Issue 13: render ahead (no order published) never changes what an open gets. Open k of a file is
// variant k / aug_reuse as (seed, path, variant) defines it, whether the open takes a variant
// rendered ahead, joins one in progress, or renders its own; from JPEG bytes or cached pixels.
void expect_exact_variants_with_render_ahead(const std::string& options, unsigned reuse, bool drain,
                                             const Rig::Size (&sizes)[4] = Rig::kSmall) {
  SCOPED_TRACE(options + (drain ? ", each render ahead done before the next open" : ", racing the opens"));
  Rig rig("probe=mount,seed=7,aug_reuse=" + std::to_string(reuse) + "," + options, sizes);
  Daemon d(rig.opts);
  ASSERT_NE(d.render_ahead(), nullptr);
  const auto spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
  const unsigned opens = 3 * reuse + 1;
  for (unsigned k = 0; k < opens; k++) {
    for (const auto& [path, jpeg] : rig.images) {
      const std::string ppm = path.substr(0, path.size() - 4) + ".ppm";
      transform::Rng rng = transform::Rng::for_variant(rig.opts.seed, path, k / reuse);
      EXPECT_EQ(
          read_file(d.augmented_fs(), walk(d.augmented_fs(), 1, ppm)),
          str(transform::render_augmented(jpeg, spec, rng, transform::OutputFormat::kPpm, augment_options(rig.opts))))
          << path << " open " << k;
      if (drain) d.render_ahead()->drain();
    }
  }
  const RenderAheadCounters& a = d.render_ahead_counters();
  // Racing the opens, a loaded machine may finish no render ahead before its open (all late).
  if (drain) {
    EXPECT_GT(load(a.used), 0u);
  }
  EXPECT_LE(load(a.used) + load(a.late) + load(a.wasted), load(a.rendered));
}

TEST(Daemon, RenderAheadNeverServesAStaleVariant) {
  for (bool drain : {true, false}) {
    expect_exact_variants_with_render_ahead("", 1, drain);                         // from the JPEG
    expect_exact_variants_with_render_ahead("partition=fixed:0/100/0", 1, drain);  // from cached pixels
    expect_exact_variants_with_render_ahead("", 3, drain);                         // a variant served 3 times
  }
  // Photos, whose large crops the JPEG path decodes at a DCT scale (fast_paths=1): a variant is
  // the same bytes whether rendered from the JPEG or from cached pixels. It was not: the pixels'
  // path resampled at full scale, so what an open got depended on what the cache held.
  static constexpr Rig::Size kLarge[] = {{1600, 1200, 3}, {1200, 1600, 3}, {1400, 1000, 3}, {1300, 1300, 1}};
  expect_exact_variants_with_render_ahead("partition=fixed:0/100/0", 1, true, kLarge);
}

TEST(Daemon, RenderAheadRendersEachFilesNextVariantOnceAfterEachServe) {
  Rig rig("probe=mount");
  Daemon d(rig.opts);
  for (int k = 0; k < 4; k++)
    for (const auto& [path, jpeg] : rig.images) {
      read_file(d.augmented_fs(), walk(d.augmented_fs(), 1, path.substr(0, path.size() - 4) + ".ppm"));
      d.render_ahead()->drain();
    }
  const RenderAheadCounters& a = d.render_ahead_counters();
  const uint64_t files = rig.images.size();
  EXPECT_EQ(load(a.rendered), 4 * files) << "one after each serve";
  EXPECT_EQ(load(a.used), 3 * files) << "every open but each file's first found its variant ready";
  EXPECT_EQ(load(a.late) + load(a.wasted), 0u);
  EXPECT_EQ(load(d.renders().augmented), 5 * files) << "first opens, and one ahead of each open";
  // .prepfs/evict drops what is staged: the last variants rendered ahead are wasted.
  d.evict_all();
  EXPECT_EQ(load(a.wasted), files);
}

// Issue 13: with a published order, the prefetcher renders each upcoming open's variant ahead (in
// a cpu slot nobody waits for) and stages it; the open then takes it instead of rendering. Open k
// of a file still gets variant k as (seed, path, k) defines it, rendered ahead or not, from JPEG
// bytes or cached pixels. Each epoch's order is published before it is read; with `wait`, the
// reads start once every variant of the epoch is ready (so none is rendered on open), else they
// race the prefetcher.
void expect_ordered_variants_rendered_ahead(const std::string& options, bool wait) {
  SCOPED_TRACE(options + (wait ? ", variants ready before the opens" : ", racing the opens"));
  // No render ahead after serves: once an epoch's order is read it would render the next variants
  // (no order left), and only the prefetcher's renders are counted here.
  Rig rig("probe=mount,seed=7,aug_reuse=1,render_ahead=0," + options);
  Daemon d(rig.opts);
  const auto spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
  std::vector<std::string> ppms;
  for (const auto& [path, jpeg] : rig.images) ppms.push_back(path.substr(0, path.size() - 4) + ".ppm");
  for (uint32_t epoch = 0; epoch < 3; epoch++) {
    std::string order = "job t\n";
    for (const std::string& ppm : ppms) order += "augmented/" + ppm + "\n";
    publish_order(d, order);
    if (wait) {
      auto all_ready = [&] {
        for (const std::string& ppm : ppms) {
          // augmented/'s inode of a file is its node + 1
          const Sample s = d.store().resolve(uint32_t(walk(d.augmented_fs(), 1, ppm) - 1));
          if (!d.store().ready(s, Form::augmented, epoch)) return false;
        }
        return true;
      };
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!all_ready() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ASSERT_TRUE(all_ready()) << "epoch " << epoch << ": the prefetcher did not render the variants ahead\n"
                               << d.stats_json() << "\n"
                               << d.planner().report_text();
    }
    const uint64_t renders = load(d.renders().augmented);
    for (size_t i = 0; i < ppms.size(); i++) {
      const auto& [path, jpeg] = rig.images[i];
      transform::Rng rng = transform::Rng::for_variant(rig.opts.seed, path, epoch);
      EXPECT_EQ(
          read_file(d.augmented_fs(), walk(d.augmented_fs(), 1, ppms[i])),
          str(transform::render_augmented(jpeg, spec, rng, transform::OutputFormat::kPpm, augment_options(rig.opts))))
          << path << " open " << epoch;
    }
    if (wait) {
      EXPECT_EQ(load(d.renders().augmented), renders) << "an open rendered its variant again";
    }
  }
}

TEST(Daemon, APublishedOrdersVariantsAreRenderedAheadAndEachOpenGetsItsOwn) {
  for (bool wait : {true, false}) {
    expect_ordered_variants_rendered_ahead("", wait);                         // partition=auto
    expect_ordered_variants_rendered_ahead("partition=fixed:100/0/0", wait);  // from the JPEG
    expect_ordered_variants_rendered_ahead("partition=fixed:0/100/0", wait);  // from cached pixels
  }
}

// A variant the prefetcher renders from raw bytes it staged is a prefetch hit when its open takes
// it, once: the render taking the staged bytes is no read. It counted as a hit, so an order whose
// variants were rendered and never opened showed a hit per file.
TEST(Daemon, APrefetchedVariantCountsOneHitWhenItsOpenTakesItNotWhenItsRenderTakesItsInputs) {
  // Nothing cached: every input the prefetcher fetches is staged.
  Rig rig("probe=mount,seed=7,aug_reuse=1,render_ahead=0,ssd=0,partition=fixed:0/0/0");
  Daemon d(rig.opts);
  d.profiler().stop();
  std::vector<std::string> ppms;
  std::vector<Sample> samples;
  std::string order = "job t\n";
  for (const auto& [path, jpeg] : rig.images) {
    ppms.push_back(path.substr(0, path.size() - 4) + ".ppm");
    order += "augmented/" + ppms.back() + "\n";
    samples.push_back(d.store().resolve(uint32_t(walk(d.augmented_fs(), 1, ppms.back()) - 1)));
  }
  publish_order(d, order);
  auto all_ready = [&] {
    for (const Sample& s : samples)
      if (!d.store().ready(s, Form::augmented, 0)) return false;
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!all_ready() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(all_ready()) << d.stats_json();
  EXPECT_EQ(load(d.prefetch_counters().hits), 0u) << "the renders' own inputs counted as hits" << d.stats_json();
  for (const std::string& ppm : ppms) read_file(d.augmented_fs(), walk(d.augmented_fs(), 1, ppm));
  EXPECT_EQ(load(d.prefetch_counters().hits), ppms.size()) << d.stats_json();
}

// A job publishes its order and its losses whoever runs it: under a mount a root service made with
// allow_other, jobs run as ordinary users, and a mode of 0200 refused them (EACCES), so they got no
// prefetching and no importance. Evicting stays the mounting user's.
TEST(Daemon, AnyJobMayPublishItsOrderAndLossesButOnlyTheOwnerEvicts) {
  Rig rig("probe=mount");
  Daemon d(rig.opts);
  d.profiler().stop();
  Filesystem& control = d.control_fs();
  EXPECT_EQ(control.getattr(walk(control, 1, "order")).mode, S_IFREG | 0222u);
  EXPECT_EQ(control.getattr(walk(control, 1, "importance")).mode, S_IFREG | 0222u);
  EXPECT_EQ(control.getattr(walk(control, 1, "evict")).mode, S_IFREG | 0200u);
  EXPECT_EQ(control.getattr(walk(control, 1, "stats")).mode, S_IFREG | 0444u);
}

// A file listed several times in one order (sampling with replacement, importance sampling) gets
// each of its opens' variants rendered ahead, not just the next one, and each open still gets the
// variant (seed, path, k) defines.
TEST(Daemon, AFileListedAgainInAnOrderGetsEachOfItsVariantsRenderedAhead) {
  for (const char* partition : {"partition=fixed:100/0/0", "partition=fixed:0/100/0"}) {
    SCOPED_TRACE(partition);
    Rig rig(std::string("probe=mount,seed=7,aug_reuse=1,render_ahead=0,") + partition);
    Daemon d(rig.opts);
    const auto spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
    constexpr uint32_t kTimes = 3;
    std::vector<std::string> ppms;
    std::vector<Sample> samples;
    for (const auto& [path, jpeg] : rig.images) {
      ppms.push_back(path.substr(0, path.size() - 4) + ".ppm");
      samples.push_back(d.store().resolve(uint32_t(walk(d.augmented_fs(), 1, ppms.back()) - 1)));
    }
    std::string order = "job t\n";
    for (uint32_t k = 0; k < kTimes; k++)
      for (size_t i = 0; i < ppms.size(); i++) order += "augmented/" + ppms[(i + k) % ppms.size()] + "\n";
    publish_order(d, order);
    auto all_ready = [&] {
      for (const Sample& s : samples)
        for (uint32_t k = 0; k < kTimes; k++)
          if (!d.store().ready(s, Form::augmented, k)) return false;
      return true;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!all_ready() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(all_ready()) << "a later open's variant was not rendered ahead\n" << d.stats_json();
    const uint64_t renders = load(d.renders().augmented);
    for (uint32_t k = 0; k < kTimes; k++)
      for (size_t i = 0; i < ppms.size(); i++) {
        const size_t f = (i + k) % ppms.size();
        const auto& [path, jpeg] = rig.images[f];
        transform::Rng rng = transform::Rng::for_variant(rig.opts.seed, path, k);
        EXPECT_EQ(read_file(d.augmented_fs(), walk(d.augmented_fs(), 1, ppms[f])),
                  str(transform::render_augmented(jpeg, spec, rng, transform::OutputFormat::kPpm,
                                                  augment_options(rig.opts))))
            << path << " open " << k;
      }
    EXPECT_EQ(load(d.renders().augmented), renders) << "an open rendered its variant itself";
  }
}

// What was staged for a file is dropped when the file changes: never served (the keys name the
// old version), but it held room and showed the sample as resident until a read took it, which
// none would.
TEST(Daemon, AChangedFileLeavesNothingStaged) {
  Rig rig("probe=mount,metadata_ttl=0");
  Daemon d(rig.opts);
  d.profiler().stop();
  const std::string path = rig.images[0].first;
  const uint64_t ino = walk(d.main_fs(), 1, "raw/" + path);
  const Sample s = d.store().resolve(uint32_t(ino & 0xffffffffu));
  const CacheKey staged = make_key(KeyFields{path, s.version, Form::raw});
  ASSERT_TRUE(d.staging().put(staged, filler(5), s.node));
  const CacheKey other = make_key(KeyFields{rig.images[1].first, FileVersion{1, 2, 3}, Form::raw});
  ASSERT_TRUE(d.staging().put(other, filler(5), s.node + 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  rig.dir.write("src/" + path, "rewritten");
  d.main_fs().lookup(walk(d.main_fs(), 1, "raw/cls"), "img0.jpg");  // revalidates (metadata_ttl=0)
  EXPECT_FALSE(d.staging().contains(staged)) << "the old version's entry stayed staged";
  EXPECT_TRUE(d.staging().contains(other));
}

// Work ahead that resolved its sample before the file changed must not stage the old version's
// variant after the change dropped what was staged: nothing would ever take it (its key names the
// old version), and it held render-ahead room and showed the sample resident for good.
TEST(Daemon, WorkAheadForAFileThatChangedMeanwhileStagesNothing) {
  Rig rig("probe=mount,metadata_ttl=0,render_ahead=0,partition=fixed:100/0/0");
  Daemon d(rig.opts);
  d.profiler().stop();
  const std::string path = rig.images[0].first;
  EXPECT_EQ(read_file(d.main_fs(), walk(d.main_fs(), 1, "raw/" + path)), str(rig.images[0].second));
  const Sample s = d.store().resolve(uint32_t(walk(d.main_fs(), 1, "raw/" + path) & 0xffffffffu));
  ASSERT_TRUE(d.store().inputs_at_hand(s));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  rig.dir.write("src/" + path, "rewritten");
  d.main_fs().lookup(walk(d.main_fs(), 1, "raw/cls"), "img0.jpg");  // revalidates (metadata_ttl=0)
  ResourceBudget::Hold slot = d.renderer().idle_slot();  // as RenderAhead holds one
  ASSERT_GT(slot.amount(), 0u);
  // The sample as resolved before the change.
  const AheadOutcome outcome = d.store().render_ahead(s, 0, [] { return true; });
  EXPECT_EQ(d.staging().bytes(), 0u) << "the old version's variant was staged after the change";
  // Wasted once: the staging counted it as it dropped the entry, and RenderAhead::render_one
  // counts a `wasted` outcome again (used + late + wasted exceeded rendered).
  EXPECT_EQ(load(d.render_ahead_counters().wasted), 1u);
  EXPECT_NE(outcome, AheadOutcome::wasted) << "counted wasted twice";
}

// Work ahead renders a variant from staged pixels without taking them: their decoded/ read is
// still to come. The render took them, so that read decoded the file again (and had the render
// given way, the pixels were gone for nothing).
TEST(Daemon, WorkAheadRendersFromStagedPixelsAndLeavesThemForTheirRead) {
  Rig rig("probe=mount,render_ahead=0,ssd=0,partition=fixed:0/0/0,fast_paths=0");
  Daemon d(rig.opts);
  d.profiler().stop();
  const std::string path = rig.images[0].first;
  const std::string ppm = path.substr(0, path.size() - 4) + ".ppm";
  const Sample s = d.store().resolve(uint32_t(walk(d.main_fs(), 1, "raw/" + path) & 0xffffffffu));
  ASSERT_GT(d.store().prefetch(s, Form::decoded, true), 0u);
  const uint64_t pixels = d.staging().bytes();
  ASSERT_GT(pixels, 0u) << "the decoded pixels were not staged";
  ASSERT_TRUE(d.store().inputs_at_hand(s, 0));
  {
    ResourceBudget::Hold slot = d.renderer().idle_slot();  // as RenderAhead holds one
    ASSERT_GT(slot.amount(), 0u);
    EXPECT_EQ(d.store().render_ahead(s, 0, [] { return true; }), AheadOutcome::rendered);
  }
  EXPECT_EQ(load(d.renders().from_decoded), 1u);
  EXPECT_EQ(d.staging().bytes(), pixels + d.store().shapes().augmented_size(s.dims)) << "the pixels were taken";
  const uint64_t decodes = load(d.renders().decoded);
  read_file(d.main_fs(), walk(d.main_fs(), 1, "decoded/" + ppm));
  EXPECT_EQ(load(d.renders().decoded), decodes) << "the decoded/ read decoded the file again";
  EXPECT_EQ(load(d.prefetch_counters().hits), 1u);
}

// The sample a raw/ path names, and the key of its first raw chunk (as the store makes it).
Sample raw_sample(Daemon& d, const std::string& path) {
  return d.store().resolve(uint32_t(walk(d.main_fs(), 1, "raw/" + path) & 0xffffffffu));
}
CacheKey first_chunk_key(Daemon& d, const Sample& s) {
  return make_key(KeyFields{s.path, s.version, Form::raw, 0, 0, 0, d.store().chunk_size()});
}

// A prefetch the placement puts in RAM, which RAM refuses (its form at its quota: the plan's
// estimate was short, or a re-plan is under way), is staged for the read. It went only among the
// recent fills, which drop it as other files are read, and the read fetched it again.
TEST(Daemon, APrefetchThatRamRefusesIsStagedForTheRead) {
  Rig rig("probe=mount,partition=fixed:100/0/0,ssd=0,ram=1M");
  Daemon d(rig.opts);
  d.profiler().stop();
  const std::string path = rig.images[0].first;
  const Sample s = raw_sample(d, path);
  ASSERT_TRUE(s.placed);
  // Something else fills the raw quota.
  const CacheKey junk = make_key(KeyFields{"elsewhere.jpg", FileVersion{1, 2, 3}, Form::raw});
  d.cache().keep(junk, filler(d.cache().stats(Tier::ram).quota_of(Form::raw) - 64), Form::raw, Admission{true, false});
  ASSERT_TRUE(d.cache().in_tier(junk));
  EXPECT_GT(d.store().prefetch(s, Form::raw, false), 0u);
  const CacheKey k = first_chunk_key(d, s);
  EXPECT_FALSE(d.cache().in_tier(k));
  EXPECT_TRUE(d.staging().contains(k)) << "a prefetch RAM refused went only among the recent fills";
  EXPECT_EQ(read_file(d.main_fs(), walk(d.main_fs(), 1, "raw/" + path)), str(rig.images[0].second));
  EXPECT_EQ(load(d.prefetch_counters().hits), 1u) << "the read did not take what was staged for it";
  EXPECT_FALSE(d.staging().contains(k));
}

// .prepfs/samples gave every sample an image path, also one the views give to another file:
// "x.jpg" and "x.JPEG" both said ".../x.ppm" (decoded/ serves the first), so a sampler's map gave
// that path the other's index, and its residency and importance went to the wrong sample.
TEST(Daemon, SamplesGiveNoImagePathAViewDoesNotShowThemUnder) {
  Rig rig("probe=mount");
  rig.dir.write("src/cls/img0.JPEG", str(rig.images[1].second));  // sorts before img0.jpg
  Daemon d(rig.opts);
  d.profiler().stop();
  const std::string samples = read_file(d.control_fs(), walk(d.control_fs(), 1, "samples"), false);
  EXPECT_NE(samples.find("cls/img0.JPEG\tcls/img0.ppm\n"), std::string::npos) << samples;
  EXPECT_NE(samples.find("cls/img0.jpg\t-\n"), std::string::npos) << samples;
  std::set<std::string> image_paths;
  std::istringstream lines(samples);
  for (std::string line; std::getline(lines, line);) {
    const std::string image = line.substr(line.find('\t') + 1);
    EXPECT_TRUE(image == "-" || image_paths.insert(image).second) << image << " is given to two samples";
  }
}

// A prefetch the SSD is to keep is staged as well: its write is only queued (it may be refused
// when the writer takes it, and reads miss until it lands). The read, served from the SSD once
// the write landed, drops the staged copy and counts the prefetch's hit, so the copy does not sit
// in the staging as waste.
TEST(Daemon, APrefetchTheSsdKeepsIsStagedUntilItsRead) {
  Rig rig("probe=mount,partition=fixed:0/0/0/100/0/0");
  Daemon d(rig.opts);
  d.profiler().stop();
  const std::string path = rig.images[0].first;
  const Sample s = raw_sample(d, path);
  ASSERT_TRUE(s.placed);
  EXPECT_GT(d.store().prefetch(s, Form::raw, false), 0u);
  const CacheKey k = first_chunk_key(d, s);
  EXPECT_TRUE(d.staging().contains(k)) << "only the queued SSD write had it";
  ASSERT_TRUE(d.cache().flush());
  ASSERT_TRUE(d.cache().in_tier(k)) << "the SSD did not keep it";
  EXPECT_EQ(read_file(d.main_fs(), walk(d.main_fs(), 1, "raw/" + path)), str(rig.images[0].second));
  EXPECT_FALSE(d.staging().contains(k)) << "the staged copy outlived the read";
  EXPECT_EQ(load(d.prefetch_counters().hits), 1u);
}

// A memcached server's name goes into .prepfs/stats escaped: one with a quote (the shared=
// parser allows it) made the whole file invalid JSON, and prepctl stats failed.
TEST(Daemon, AServerNameWithAQuoteKeepsTheStatsValidJson) {
  Rig rig("probe=mount,shared=memcached://odd\"name:11211");
  Daemon d(rig.opts);
  d.profiler().stop();
  const std::string stats = d.stats_json();
  EXPECT_NE(stats.find(R"("name": "odd\"name:11211")"), std::string::npos) << stats;
}

// Work ahead runs in a CPU slot it holds. It must not wait for an open's render of the same
// variant: that render may be waiting for the very slot (cpu=1 here, or every slot held ahead),
// and both used to wait out fill_wait (60 s) before the open got its variant.
TEST(Daemon, ARenderAheadDoesNotWaitForAnOpensRenderThatWaitsForItsSlot) {
  Rig rig("probe=mount,seed=7,aug_reuse=1,render_ahead=0,cpu=1,partition=fixed:100/0/0");
  Daemon d(rig.opts);
  d.profiler().stop();
  const auto& [path, jpeg] = rig.images[0];
  const uint64_t ino = walk(d.augmented_fs(), 1, path.substr(0, path.size() - 4) + ".ppm");
  const Sample s = d.store().resolve(uint32_t(ino - 1));
  EXPECT_EQ(read_file(d.main_fs(), walk(d.main_fs(), 1, "raw/" + path)), str(jpeg));  // kept in RAM
  ASSERT_TRUE(d.store().inputs_at_hand(s));
  ResourceBudget::Hold slot = d.renderer().idle_slot();  // the only one, held as work ahead holds it
  ASSERT_GT(slot.amount(), 0u);
  const uint64_t fills = load(d.cache().counters().fills);
  auto open = std::async(std::launch::async, [&] { return read_file(d.augmented_fs(), ino); });
  // The open's render is under way (its fill counted) and waits for the slot.
  while (load(d.cache().counters().fills) == fills) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto ahead = std::async(std::launch::async, [&] { return d.store().render_ahead(s, 0, [] { return true; }); });
  ASSERT_EQ(ahead.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the render ahead waited for the open's render, which waits for the slot it holds";
  // Nothing rendered here (RenderAhead counted it in `rendered` as a late render, work it never did).
  EXPECT_EQ(ahead.get(), AheadOutcome::ready);
  slot.reset();
  const auto spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
  transform::Rng rng = transform::Rng::for_variant(rig.opts.seed, path, 0);
  EXPECT_EQ(open.get(),
            str(transform::render_augmented(jpeg, spec, rng, transform::OutputFormat::kPpm, augment_options(rig.opts))));
}

// Work ahead gives way, at once, to a reader that holds the transform memory it needs (it holds
// a cpu slot the reader may wait for). Giving way is no failure: both ways of rendering before an
// open report the variant skipped. Before, only RenderAhead caught it, and a published order's
// prefetch logged it as an error.
TEST(Daemon, WorkAheadThatGivesWayToAReaderHoldingTransformMemoryIsSkippedNotAnError) {
  Rig rig("probe=mount,seed=7,aug_reuse=1,render_ahead=0,cpu=2,partition=fixed:100/0/0,transform_mem=32M");
  Daemon d(rig.opts);
  d.profiler().stop();
  const auto& [path, jpeg] = rig.images[0];
  EXPECT_EQ(read_file(d.main_fs(), walk(d.main_fs(), 1, "raw/" + path)), str(jpeg));  // kept in RAM
  const Sample s = raw_sample(d, path);
  ASSERT_TRUE(d.store().inputs_at_hand(s, 0));
  // A reader's decode that takes all but less than what the variant's render needs.
  const uint64_t budget = d.renderer().config().transform_mem;
  const uint64_t ahead_needs =
      render_memory(d.store().shapes(), s.dims, s.version.size, RenderPath::augment_from_jpeg, budget).total();
  Sample big = s;
  auto reader_needs = [&](uint32_t h) {
    big.dims.width = 1000;
    big.dims.height = h;
    return render_memory(d.store().shapes(), big.dims, s.version.size, RenderPath::decode, budget).total();
  };
  uint32_t h = 1;
  while (reader_needs(h) + ahead_needs <= budget) h++;
  ASSERT_LE(reader_needs(h), budget);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> holding{false};
  auto reader = std::async(std::launch::async, [&] {
    try {
      d.renderer().decoded(big, [&] {
        holding = true;
        gate.wait();
        return JpegBytes{};  // not a JPEG: EIO once the memory is given back
      });
    } catch (const Error&) {
    }
  });
  while (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // An outcome, or the errno of what was thrown (-1 for no slot): the reader is let go either way.
  auto ahead = [&](auto render) {
    ResourceBudget::Hold slot = d.renderer().idle_slot();  // as RenderAhead holds one
    if (slot.amount() == 0) return -1;
    try {
      return int(render());
    } catch (const Error& e) {
      return 1000 + e.err();
    }
  };
  const int rendered_ahead = ahead([&] { return d.store().render_ahead(s, 0, [] { return true; }); });
  const int prefetched = ahead([&] { return d.store().prefetch_variant(s, 0, [] { return true; }).outcome; });
  const uint64_t staged = d.staging().bytes();
  release.set_value();
  reader.get();
  EXPECT_EQ(rendered_ahead, int(AheadOutcome::skipped)) << "1000 + errno when it threw";
  EXPECT_EQ(prefetched, int(AheadOutcome::skipped)) << "1000 + errno when it threw";
  EXPECT_EQ(staged, 0u);
  // The variant is rendered as ever once the memory is back.
  ResourceBudget::Hold slot = d.renderer().idle_slot();
  ASSERT_GT(slot.amount(), 0u);
  EXPECT_EQ(d.store().render_ahead(s, 0, [] { return true; }), AheadOutcome::rendered);
}

// A published order's variant is rendered ahead from inputs fetched first, in a cpu slot nobody
// waits for. Inputs dropped meanwhile (a re-plan moved the sample; an eviction) are fetched
// again, and kept where the sample's slot is now: the variant is still rendered before its open.
// Before, the task gave up, the coordinator had moved past it, and the open rendered it itself;
// and the refetch kept the inputs in the slot the sample had when the task began.
TEST(Daemon, AVariantsInputsDroppedWhileItWaitsForASlotAreFetchedAgain) {
  Rig rig("probe=mount,seed=7,aug_reuse=1,render_ahead=0,cpu=2,partition=fixed:100/0/0");
  Daemon d(rig.opts);
  d.profiler().stop();  // no re-plan of its own: the test moves the samples itself
  std::vector<Sample> samples;
  std::string order = "job t\n";
  for (const auto& [path, jpeg] : rig.images) {
    const std::string ppm = path.substr(0, path.size() - 4) + ".ppm";
    order += "augmented/" + ppm + "\n";
    samples.push_back(d.store().resolve(uint32_t(walk(d.augmented_fs(), 1, ppm) - 1)));
  }
  // Every cpu slot busy: the prefetcher fetches the inputs, then waits for an idle slot.
  std::vector<ResourceBudget::Hold> slots;
  for (ResourceBudget::Hold h; (h = d.renderer().idle_slot()).amount() > 0;) slots.push_back(std::move(h));
  ASSERT_EQ(slots.size(), 2u);
  publish_order(d, order);
  auto all = [&](auto&& pred) {
    for (const Sample& s : samples)
      if (!pred(s)) return false;
    return true;
  };
  auto wait_for = [&](auto&& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return done();
  };
  // Every task has its inputs and waits for a slot. (Inputs at hand alone can be the mount's
  // header reads: a task that starts after the forget below would fetch them before it waits.)
  ASSERT_TRUE(wait_for([&] {
    return load(d.prefetch_counters().slot_waits) >= samples.size() &&
           all([&](const Sample& s) { return d.store().inputs_at_hand(s); });
  })) << d.stats_json();
  ASSERT_GT(d.cache().stats(Tier::ram).entries_of(Form::raw), 0u);
  // What a re-plan's move does: the raw bytes' slot is now on the SSD, and the entries go. (The
  // SSD gets a quota for raw bytes; RAM keeps its own, so a refetch into the old slot would stay.)
  model::Placement on_ssd;
  on_ssd.at(Form::raw, Tier::ssd) = double(samples.size());
  d.cache().set_partition({1, 0, 0}, {1, 0, 0});
  d.placer().set(on_ssd, double(samples.size()));
  for (const Sample& s : samples) d.store().forget(s, Form::raw, 0);
  // (A spare SSD copy being written as it is erased stays visible until its write ends.)
  ASSERT_TRUE(wait_for([&] { return all([&](const Sample& s) { return !d.store().inputs_at_hand(s); }); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the tasks see no idle slot yet
  slots.clear();
  EXPECT_TRUE(wait_for([&] { return all([&](const Sample& s) { return d.store().ready(s, Form::augmented, 0); }); }))
      << "the variants whose inputs were dropped were never rendered ahead";
  const uint64_t renders = load(d.renders().augmented);
  const auto spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
  for (const auto& [path, jpeg] : rig.images) {
    transform::Rng rng = transform::Rng::for_variant(rig.opts.seed, path, 0);
    EXPECT_EQ(read_file(d.augmented_fs(), walk(d.augmented_fs(), 1, path.substr(0, path.size() - 4) + ".ppm")),
              str(transform::render_augmented(jpeg, spec, rng, transform::OutputFormat::kPpm, augment_options(rig.opts))))
        << path;
  }
  EXPECT_EQ(load(d.renders().augmented), renders) << "an open rendered its variant itself";
  ASSERT_TRUE(d.cache().flush());
  EXPECT_EQ(d.cache().stats(Tier::ram).entries_of(Form::raw), 0u) << "refetched into the old slot";
  EXPECT_GT(d.cache().stats(Tier::ssd).entries_of(Form::raw), 0u) << d.stats_json();
  const std::string stats = d.stats_json();
  for (const char* field : {"\"slot_waits\": ", "\"refetched\": "}) {
    const size_t at = stats.find(field);
    ASSERT_NE(at, std::string::npos) << field;
    EXPECT_GE(std::stoull(stats.substr(at + std::strlen(field))), samples.size()) << field << stats;
  }
}

// Issue 13: for an augmented consumer the plan keeps decoded pixels when they fit, and the next
// variants render from them (no JPEG decode).
TEST(Daemon, AnAugmentedConsumerGetsDecodedPixelsPlacedAndVariantsRenderFromThem) {
  Rig rig("probe=mount,render_ahead=0", Rig::kPhotos);  // partition=auto; RAM holds every decoded image
  Daemon d(rig.opts);
  auto read_all = [&] {
    for (const auto& [path, jpeg] : rig.images)
      read_file(d.augmented_fs(), walk(d.augmented_fs(), 1, path.substr(0, path.size() - 4) + ".ppm"));
  };
  read_all();
  d.profiler().tick();  // the view is augmented/ now
  d.planner().plan_now("test");
  const Planner::Status st = d.planner().status();
  EXPECT_EQ(st.enforced.at(Form::decoded, Tier::ram), double(rig.images.size())) << d.planner().report_text();
  const uint64_t decodes = load(d.renders().decoded), from_pixels = load(d.renders().from_decoded);
  read_all();  // each file's pixels are decoded and kept, and its variant renders from them
  read_all();  // from the cached pixels alone
  EXPECT_EQ(load(d.renders().decoded) - decodes, rig.images.size());
  EXPECT_EQ(load(d.renders().from_decoded) - from_pixels, 2 * rig.images.size());
}

// A job's first request for the sample list (.prepfs/samples) on a first mount needs every
// header but is not followed by reads of those files soon: it reads header bytes, not whole first
// chunks that only the recent fills and the staging (a few MiB) would hold until the job reads
// them (a first epoch then fetched the dataset twice).
void read_sample_list(const std::string& options) {
  SCOPED_TRACE(options);
  Rig rig(options);
  std::vector<std::string> jpegs;
  for (int i = 0; i < 4; i++) {  // textured 640x480 JPEGs: several times the 16 KiB header probe
    std::vector<uint8_t> jpeg = xt::encode_jpeg(xt::synthetic_samples(640, 480, 3, 40 + i), 640, 480, 3);
    ASSERT_GT(jpeg.size(), 4 * transform::kHeaderProbeBytes);
    jpegs.emplace_back(jpeg.begin(), jpeg.end());
  }
  // More files than the mount's sample of headers (64), so the list has some to read.
  for (int i = 0; i < 96; i++) rig.dir.write("src/big/img" + std::to_string(i) + ".jpg", jpegs[i % 4]);
  Daemon d(rig.opts);
  const uint64_t unknown = d.tree().unprobed_count();
  ASSERT_GE(unknown, 20u);
  const uint64_t before = load(d.source().counters().bytes);
  const std::string list = read_file(d.control_fs(), walk(d.control_fs(), 1, "samples"), false);  // size 0: read to the end
  EXPECT_NE(list.find("big/img95.jpg\tbig/img95.ppm\n"), std::string::npos) << list;
  EXPECT_EQ(d.tree().unprobed_count(), 0u);
  EXPECT_LE(load(d.source().counters().bytes) - before, unknown * transform::kHeaderProbeBytes)
      << "the sample list fetched whole files";
}

TEST(Daemon, TheSampleListReadsHeaderBytesNotWholeFiles) {
  read_sample_list("ram=0,ssd=0");                            // nothing is kept anywhere
  read_sample_list("ram=64M,ssd=0,partition=fixed:100/0/0");  // every raw sample in RAM
}

// A lazy mount reads an unprobed file's header with its first chunk, among the recent fills (a
// read racing the probe finds it there), then keeps that chunk where the placement puts the
// sample. It used to ask get_or_fill to do so, which serves a recent fill as it is: the chunk was
// never admitted, and no later read admitted it either while it stayed among the recent fills.
TEST(Daemon, AProbedFirstChunkIsKeptWhereThePlacementPutsTheSample) {
  Rig rig("ssd=0,render_ahead=0,partition=fixed:100/0/0");  // probe=lazy; every raw sample in RAM
  std::vector<uint8_t> jpeg = xt::encode_jpeg(xt::synthetic_samples(640, 480, 3, 40), 640, 480, 3);
  ASSERT_LE(jpeg.size(), 1u << 20);  // one chunk each
  // More files than the mount's sample of headers (64), so some are probed by their first read.
  const int files = 96;
  for (int i = 0; i < files; i++) rig.dir.write("src/big/img" + std::to_string(i) + ".jpg", str(jpeg));
  Daemon d(rig.opts);
  ASSERT_GE(d.tree().unprobed_count(), 20u);
  for (int i = 0; i < files; i++)
    read_file(d.main_fs(), walk(d.main_fs(), 1, "decoded/big/img" + std::to_string(i) + ".ppm"));
  EXPECT_EQ(d.cache().stats(Tier::ram).entries_of(Form::raw), uint64_t(files)) << d.stats_json();
}

// Issue 13: the kernel may keep a variant's pages across that variant's opens, but an inode's pages
// are one variant while handles may hold different ones (core/variant_pages.h). The first open of
// new bytes answers without keep_cache (the kernel drops older pages in that open), and so do
// later opens of them until a read shows that drop done; then opens keep the pages; an open of
// other bytes while page-cache handles are open bypasses the page cache.
TEST(Daemon, AugmentedOpensKeepPagesOnlyOfTheBytesTheyWereFilledFrom) {
  Rig rig("aug_reuse=3,render_ahead=0");
  Daemon d(rig.opts);
  Filesystem& fs = d.augmented_fs();
  const uint64_t ino = walk(fs, 1, "cls/img0.ppm");
  auto bytes = [&](const OpenReply& r) {
    std::string out;
    for (const Slice& s : fs.read(ino, r.fh, 0, 1 << 20)) out.append(s.data, s.len);
    return out;
  };
  auto invalidates = [](const OpenReply& r) { return !r.keep_cache && !r.direct_io; };
  auto keeps = [](const OpenReply& r) { return r.keep_cache && !r.direct_io; };
  auto bypasses = [](const OpenReply& r) { return r.keep_cache && r.direct_io; };
  const OpenReply a = fs.open(ino, O_RDONLY);  // variant 0: new bytes
  EXPECT_TRUE(invalidates(a));
  const OpenReply b = fs.open(ino, O_RDONLY);  // variant 0, but no read has shown the drop done
  EXPECT_TRUE(invalidates(b));
  const std::string v0 = bytes(b);
  const OpenReply c = fs.open(ino, O_RDONLY);  // variant 0 again: the pages are good as they are
  EXPECT_TRUE(keeps(c));
  EXPECT_TRUE(bytes(a) == v0 && bytes(c) == v0);
  const OpenReply e = fs.open(ino, O_RDONLY);  // variant 1 while a, b, c read variant 0's pages
  EXPECT_TRUE(bypasses(e));
  const std::string v1 = bytes(e);
  EXPECT_TRUE(v1 != v0);
  for (const OpenReply* r : {&a, &b, &c, &e}) fs.release(ino, r->fh);
  const OpenReply f = fs.open(ino, O_RDONLY);  // variant 1, no page-cache reader left: new bytes
  EXPECT_TRUE(invalidates(f));
  EXPECT_TRUE(bytes(f) == v1);
  fs.release(ino, f.fh);
  const OpenReply g = fs.open(ino, O_RDONLY);  // variant 1
  EXPECT_TRUE(keeps(g));
  fs.release(ino, g.fh);
  EXPECT_EQ(load(d.views().augmented_page_cache_opens), 5u);
  EXPECT_EQ(load(d.views().augmented_page_invalidations), 3u);
}

TEST(Daemon, AugmentedOpensBypassThePageCacheWhenTurnedOff) {
  Rig rig("aug_reuse=4,aug_page_cache=0,render_ahead=0");
  Daemon d(rig.opts);
  const uint64_t ino = walk(d.augmented_fs(), 1, "cls/img1.ppm");
  for (int i = 0; i < 3; i++) {
    const OpenReply r = d.augmented_fs().open(ino, O_RDONLY);
    EXPECT_TRUE(r.direct_io);
    EXPECT_FALSE(r.keep_cache);
    d.augmented_fs().release(ino, r.fh);
  }
  EXPECT_EQ(load(d.views().augmented_page_cache_opens), 0u);
}

// A variant the daemon renders again (its entry evicted) keeps the pages only when it is the same
// bytes: fast_paths=0 makes every render path give the same bytes, so here it does.
TEST(Daemon, AVariantRenderedAgainKeepsItsPagesWhenItsBytesAreTheSame) {
  Rig rig("aug_reuse=3,render_ahead=0,fast_paths=0");
  Daemon d(rig.opts);
  Filesystem& fs = d.augmented_fs();
  const uint64_t ino = walk(fs, 1, "cls/img2.ppm");
  const OpenReply a = fs.open(ino, O_RDONLY);
  EXPECT_FALSE(a.keep_cache);
  fs.read(ino, a.fh, 0, 4096);  // the kernel has dropped older pages
  fs.release(ino, a.fh);
  d.evict_all();
  const uint64_t renders = load(d.renders().augmented);
  const OpenReply b = fs.open(ino, O_RDONLY);  // variant 0 again, rendered again
  EXPECT_EQ(load(d.renders().augmented), renders + 1) << "the variant was not rendered again";
  EXPECT_TRUE(b.keep_cache && !b.direct_io) << "dropped pages that held the same bytes";
  fs.release(ino, b.fh);
}

// Issue 13: after a file's bytes have decoded to their end once, a variant from the JPEG reads
// no further than its crop, and still gives exactly the variant (seed, path, k) defines.
TEST(Daemon, VariantsFromAVerifiedJpegStopBelowTheCropWithTheSameBytes) {
  Rig rig("probe=mount,aug_reuse=1,render_ahead=0,ram=0,ssd=0", Rig::kPhotos);  // every variant from the JPEG
  Daemon d(rig.opts);
  const auto spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
  const auto& [path, jpeg] = rig.images[0];
  const uint64_t ino = walk(d.augmented_fs(), 1, path.substr(0, path.size() - 4) + ".ppm");
  for (uint32_t k = 0; k < 4; k++) {
    transform::Rng rng = transform::Rng::for_variant(rig.opts.seed, path, k);
    EXPECT_TRUE(read_file(d.augmented_fs(), ino) ==
                str(transform::render_augmented(jpeg, spec, rng, transform::OutputFormat::kPpm,
                                                augment_options(rig.opts))))
        << "variant " << k;
  }
  EXPECT_EQ(load(d.renders().from_decoded), 0u);
  EXPECT_EQ(load(d.renders().stopped_below_crop), 3u) << "the first render reads the whole file, the others stop";
}

TEST(VerifiedFiles, HoldsAFileVersionAndNothingElse) {
  VerifiedFiles v(100);
  const FileVersion a{1000, 5, 7}, b{1000, 6, 7};
  EXPECT_FALSE(v.contains(3, a));
  v.insert(3, a);
  EXPECT_TRUE(v.contains(3, a));
  EXPECT_FALSE(v.contains(3, b)) << "another version of the file";
  EXPECT_FALSE(v.contains(4, a)) << "another file";
  for (uint32_t node = 0; node < 100000; node++) v.insert(node + 10, a);  // far more than it holds
  for (uint32_t node = 0; node < 100000; node++) EXPECT_FALSE(v.contains(node + 10, b));
}

// Issue 13: with aug_reuse > 1, a sample kept decoded in RAM keeps its variant of the moment there
// too (the plan counts the room), until the variant's last serve: one render from the pixels
// serves every open of the variant, whatever room the recent fills have.
TEST(Daemon, AVariantStaysBesideItsPixelsInRamUntilItsLastServe) {
  Rig rig("probe=mount,aug_reuse=4,render_ahead=0,partition=fixed:0/100/0", Rig::kPhotos);
  Daemon d(rig.opts);
  const uint64_t ino = walk(d.augmented_fs(), 1, "cls/img0.ppm");
  auto ram_variants = [&] { return d.cache().stats(Tier::ram).bytes_of(Form::augmented); };
  // The plan learns that augmented/ is read (the first plan knows nothing of the view yet). Until
  // a plan gives variants that room, the store does not admit them to RAM. (What RAM holds would
  // not show it: the augmented quota is 0 until then, and the tier refuses the insert anyway.)
  read_file(d.augmented_fs(), walk(d.augmented_fs(), 1, "cls/img1.ppm"));
  const Sample img0 = d.store().resolve(uint32_t(ino - 1));
  ASSERT_TRUE(img0.slot && img0.slot->form == Form::decoded) << "0/100/0 keeps every sample decoded";
  EXPECT_FALSE(d.store().admission(img0, Form::augmented).ram) << "a variant admitted before the plan gave it room";
  d.profiler().tick_window(std::chrono::seconds(1));
  d.planner().plan_now("the view is known");
  EXPECT_TRUE(d.store().admission(img0, Form::augmented).ram) << "the plan gives variants room beside pixels";
  const uint64_t renders = load(d.renders().augmented), from_pixels = load(d.renders().from_decoded);
  for (int open = 0; open < 4; open++) {
    read_file(d.augmented_fs(), ino);
    if (open < 3) {
      EXPECT_GT(ram_variants(), 0u) << "open " << open << ": the variant was not kept in RAM";
    }
  }
  EXPECT_EQ(ram_variants(), 0u) << "kept after its last serve";
  EXPECT_EQ(load(d.renders().augmented), renders + 1);
  EXPECT_EQ(load(d.renders().from_decoded), from_pixels + 1);
}

// A directory source that runs a hook after each read: a revalidation between a read and what
// the reader does with its bytes.
class AfterReadSource : public Source {
 public:
  AfterReadSource(const std::string& root, std::function<void()> hook) : inner_(root), hook_(std::move(hook)) {}
  std::string identity() const override { return inner_.identity(); }
  void scan(const Visitor& visit) override { inner_.scan(visit); }
  SourceStat stat(const std::string& rel) override { return inner_.stat(rel); }
  std::optional<DirFingerprint> dir_fingerprint(const std::string& rel) override { return inner_.dir_fingerprint(rel); }
  size_t read(const std::string& rel, const FileVersion& expect, uint64_t off, void* buf, size_t len) override {
    const size_t n = inner_.read(rel, expect, off, buf, len);
    if (hook_) std::exchange(hook_, nullptr)();
    return n;
  }

 private:
  PosixSource inner_;
  std::function<void()> hook_;
};

// Two revalidations of one file overlap: the first stats version 2 and reads its header, the
// file becomes version 3, and the second (a read error's) installs 3 before the first commits.
// The first then installed its older stat, so the index claimed version 2 of a file at 3 and
// every read of it failed until a later check.
TEST(FileRevalidator, AnOverlappingRevalidationNeverInstallsTheOlderStat) {
  test::TempDir d;
  d.write("src/a.bin", std::string(100, 'a'));
  FileRevalidator* revalidator = nullptr;
  Tree* tree = nullptr;
  uint32_t node = 0;
  // After the first revalidation's header read (its stat done, its commit to come).
  AfterReadSource src(d / "src", [&] {
    d.write("src/a.bin", std::string(300, 'c'));  // version 3
    revalidator->maybe_revalidate(node, true);
    ASSERT_EQ(tree->version(node).size, 300u) << "the second revalidation did not install version 3";
  });
  Tree scanned = Tree::scan(src);
  tree = &scanned;
  node = *scanned.lookup(Tree::kRoot, "a.bin");
  ViewCounters counters;
  FileRevalidator r(scanned, src, counters, 0);
  revalidator = &r;
  std::vector<uint64_t> told;  // the old sizes listeners were told of
  r.on_change([&](uint32_t, const FileVersion& old) { told.push_back(old.size); });
  d.write("src/a.bin", std::string(200, 'b'));  // version 2
  r.maybe_revalidate(node, true);
  EXPECT_EQ(scanned.version(node), version_of(src.stat("a.bin"))) << "the index holds an older version";
  EXPECT_EQ(scanned.version(node).size, 300u);
  EXPECT_EQ(told, (std::vector<uint64_t>{100})) << "listeners are told of each version replaced, once";
  EXPECT_EQ(load(counters.changed_files), 1u);
}

// A pipeline whose images would pass max_pixels is refused (EIO) before any work: from the JPEG
// it was, but a render from cached decoded pixels went ahead, so the same augmented/ file was EIO
// or bytes by what the cache held, and the limit no longer bounded that render's memory.
// A 100x100 JPEG in memory as the sample "a.jpg", with the dimensions the index gives it, and
// the fetch a render reads its bytes through.
struct JpegSample {
  std::vector<uint8_t> jpeg = xt::encode_jpeg(xt::synthetic_samples(100, 100, 3, 1), 100, 100, 3);
  Sample s;
  explicit JpegSample(ImageDims indexed) {
    s.node = 1;
    s.path = "a.jpg";
    s.version = FileVersion{jpeg.size(), 1};
    s.dims = indexed;
    s.is_sample = true;
  }
  Renderer::FetchJpeg fetch() const {
    return [this] {
      JpegBytes b;
      b.owned = jpeg;
      b.bytes = b.owned;
      return b;
    };
  }
};

TEST(Renderer, APipelinePastMaxPixelsIsRefusedFromPixelsToo) {
  RenderCounters counters;
  RenderConfig rc;
  rc.shapes.spec = transform::PipelineSpec::parse("resize(120)");
  rc.shapes.max_pixels = 100 * 100;  // the source is exactly at the limit: a sample
  Renderer r(rc, counters);
  const JpegSample js(ImageDims{100, 100});
  const Sample& s = js.s;
  const Renderer::FetchJpeg fetch = js.fetch();
  auto render_errno = [&](const ChunkRef& pixels) {
    try {
      r.augmented(s, 0, pixels, fetch);
      return 0;
    } catch (const Error& e) {
      return e.err();
    }
  };
  EXPECT_EQ(render_errno(nullptr), EIO) << "from the JPEG";
  const ChunkRef pixels = r.decoded(s, fetch);
  EXPECT_EQ(render_errno(pixels), EIO) << "from decoded pixels";
}

// A failure inside a transform other than a decode error (here the index's dimensions smaller
// than the JPEG's, so the buffer made for them is too small: std::length_error) reached the
// reader as EIO all the same, but uncounted and with no line in the log.
TEST(Renderer, AnyFailureInsideATransformIsCountedAndLogged) {
  RenderCounters counters;
  RenderConfig rc;
  Renderer r(rc, counters);
  const JpegSample js(ImageDims{50, 50});  // not the JPEG's
  std::ostringstream lines;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_st>(lines)));
  int err = 0;
  try {
    r.decoded(js.s, js.fetch());
  } catch (const Error& e) {
    err = e.err();
  }
  spdlog::set_default_logger(previous);
  EXPECT_EQ(err, EIO);
  EXPECT_EQ(load(counters.errors), 1u);
  EXPECT_NE(lines.str().find("a.jpg: cannot decode"), std::string::npos) << lines.str();
}

// One JPEG, "a.jpg", listed with the version identity given (as an S3 listing gives the ETag's
// hash now, and 0 before), its reads counted.
class OneJpegSource : public Source {
 public:
  std::vector<uint8_t> jpeg = xt::encode_jpeg(xt::synthetic_samples(64, 48, 3, 1), 64, 48, 3);
  uint64_t identity_of_a = 0;
  int64_t mtime_of_a = 5'000'000'123;
  std::atomic<int> reads{0};
  std::string identity() const override { return "mem:one"; }
  void scan(const Visitor& visit) override {
    visit("", SourceStat{S_IFDIR | 0755, 0, 1, {}});
    visit("a.jpg", SourceStat{S_IFREG | 0644, jpeg.size(), mtime_of_a, {}, identity_of_a});
  }
  SourceStat stat(const std::string&) override { throw Error(ENOENT, "not used"); }
  std::optional<DirFingerprint> dir_fingerprint(const std::string&) override { return std::nullopt; }
  size_t read(const std::string&, const FileVersion&, uint64_t off, void* buf, size_t len) override {
    reads++;
    if (off >= jpeg.size()) return 0;
    const size_t n = std::min<size_t>(len, jpeg.size() - size_t(off));
    std::memcpy(buf, jpeg.data() + off, n);
    return n;
  }
};

// S3 versions have an identity now (the ETag's 64-bit hash); an index from before has 0 there.
// Its image headers are kept where size and mtime (which folds in part of that hash) agree, not
// read again for every object of the bucket at the first mount after the upgrade.
TEST(HeaderProber, AnIndexFromBeforeS3IdentitiesKeepsItsHeaders) {
  OneJpegSource src;
  Tree before = Tree::scan(src);
  probe_images(before, src, 1, nullptr);
  const int reads = src.reads.load();
  ASSERT_GT(reads, 0);
  src.identity_of_a = 0x1234'5678'9abc'def0;
  Tree now = Tree::scan(src);
  probe_images(now, src, 1, &before);
  EXPECT_EQ(src.reads.load(), reads) << "the header was read again";
  EXPECT_EQ(now.dims(*now.lookup(Tree::kRoot, "a.jpg")), (ImageDims{64, 48}));
  src.mtime_of_a += 1'000'000'000;  // another object now: read
  Tree changed = Tree::scan(src);
  probe_images(changed, src, 1, &before);
  EXPECT_GT(src.reads.load(), reads);
}

// A directory source whose reads fail while it is down (a remote source's outage).
class FlakySource : public Source {
 public:
  explicit FlakySource(const std::string& root) : inner_(root) {}
  std::atomic<bool> down{false};
  std::atomic<uint64_t> reads{0};
  std::string identity() const override { return inner_.identity(); }
  void scan(const Visitor& visit) override { inner_.scan(visit); }
  SourceStat stat(const std::string& rel) override { return inner_.stat(rel); }
  std::optional<DirFingerprint> dir_fingerprint(const std::string& rel) override { return inner_.dir_fingerprint(rel); }
  size_t read(const std::string& rel, const FileVersion& expect, uint64_t off, void* buf, size_t len) override {
    reads++;
    if (down) throw Error(EIO, "the source is down");
    return inner_.read(rel, expect, off, buf, len);
  }

 private:
  PosixSource inner_;
};

// A header read that failed (the source down, a timeout) was recorded as "no image": the file
// was gone from decoded/ and augmented/ for good, and index.bin kept it so for later mounts. It
// stays unread now, and its next use reads it again; either way, at mount or while serving.
TEST(HeaderProber, AHeaderReadThatFailsIsReadAgainAtTheNextUse) {
  for (const bool at_mount : {false, true}) {
    SCOPED_TRACE(at_mount ? "probed at mount" : "probed while serving");
    test::TempDir d;
    const std::vector<uint8_t> jpeg = xt::encode_jpeg(xt::synthetic_samples(64, 48, 3, 1), 64, 48, 3);
    d.write("src/img.jpg", std::string(jpeg.begin(), jpeg.end()));
    FlakySource src(d / "src");
    Tree tree = Tree::scan(src);
    const uint32_t node = *tree.lookup(Tree::kRoot, "img.jpg");
    src.down = true;
    probe_images(tree, src, at_mount ? 2 : 0, nullptr);  // 0: a lazy first mount, nothing read
    TierManager cache(CacheConfig{64 << 20, 0, d / "ssd", "lru"});
    test::ReadPath rp(src, tree, cache);
    HeaderProber prober(tree, rp.store, src, 2);
    if (at_mount) prober.unread_failed_at_mount();
    DataFs fs(tree, src, rp.store, rp.views, rp.invalidations, DataFsConfig{}, &prober);
    const uint64_t decoded = fs.lookup(DataFs::kRootIno, "decoded").ino;
    auto lookup_errno = [&](const char* name = "img.ppm") {
      try {
        fs.lookup(decoded, name);
        return 0;
      } catch (const Error& e) {
        return e.err();
      }
    };
    // EIO, not ENOENT: the kernel would remember that the name does not exist.
    EXPECT_EQ(lookup_errno(), EIO);
    // Not read again before its retry is due: a file that keeps failing cost a read (an S3
    // timeout) at every lookup in its directory.
    const uint64_t tries = src.reads.load();
    EXPECT_EQ(lookup_errno(), EIO);
    EXPECT_EQ(src.reads.load(), tries) << "read again at once";
    prober.retry_failed_now();
    EXPECT_FALSE(tree.dims(node).known()) << "a failed read was recorded as " << tree.dims(node).width << "x"
                                          << tree.dims(node).height;
    EXPECT_TRUE(prober.settled()) << "every header was tried";
    src.down = false;
    EXPECT_EQ(lookup_errno(), 0);
    EXPECT_EQ(tree.dims(node), (ImageDims{64, 48}));
    EXPECT_EQ(lookup_errno("other.ppm"), ENOENT) << "a name no file may have";
    EXPECT_TRUE(prober.settled());
    EXPECT_TRUE(prober.complete());
  }
}

// A lazy mount reads an unprobed image's header when decoded/ or augmented/ first reads it. A
// revalidation that installs a new version meanwhile used to let that read go on with the new
// version: a decoded/ inode of the old version got the new image's pixels. Now decoded/ answers
// EIO (open it again), augmented/ (whose inodes name no version) serves the new version, and the
// new version keeps its own dimensions.
TEST(SampleStore, AFileChangedWhileItsHeaderIsReadIsEioInDecodedAndNewInAugmented) {
  for (const Form form : {Form::decoded, Form::augmented}) {
    SCOPED_TRACE(form_name(form));
    test::TempDir d;
    const std::vector<uint8_t> old_jpeg = xt::encode_jpeg(xt::synthetic_samples(64, 48, 3, 1), 64, 48, 3);
    const std::vector<uint8_t> new_jpeg = xt::encode_jpeg(xt::synthetic_samples(40, 30, 3, 2), 40, 30, 3);
    d.write("src/img.jpg", std::string(old_jpeg.begin(), old_jpeg.end()));
    Tree* tree_ptr = nullptr;
    uint32_t node = 0;
    AfterReadSource src(d / "src", [&] {  // once the old version's first chunk is read
      d.write("src/img.jpg", std::string(new_jpeg.begin(), new_jpeg.end()));
      Tree::FileState st = tree_ptr->file_state(node);
      st.version = version_of(PosixSource(d / "src").stat("img.jpg"));
      st.dims = {40, 30};
      tree_ptr->set_file_state(node, st);  // as the revalidation does
    });
    Tree tree = Tree::scan(src);
    tree.set_all_dims(std::vector<ImageDims>(tree.size(), ImageDims::unprobed()));  // a lazy first mount
    tree_ptr = &tree;
    node = *tree.lookup(Tree::kRoot, "img.jpg");
    TierManager cache(CacheConfig{64 << 20, 0, d / "ssd", "lru"});
    test::ReadPath rp(src, tree, cache);
    const Sample old = rp.store.resolve(node);
    ASSERT_FALSE(old.dims.known());
    if (form == Form::decoded) {
      try {
        const ChunkRef c = rp.store.decoded(old);
        ADD_FAILURE() << "a read of the old version got " << c->size() << " bytes of the new one";
      } catch (const Error& e) {
        EXPECT_EQ(e.err(), EIO) << e.what();
      }
      EXPECT_EQ(rp.store.decoded(rp.store.resolve(node))->size(), rp.config.shapes.decoded_size({40, 30}));
    } else {
      // As AugmentedFs::open does: the header first, then the render of that sample.
      EXPECT_EQ(rp.store.augmented(rp.store.with_header(old), 0, true)->size(),
                rp.config.shapes.augmented_size({40, 30}));
    }
    EXPECT_EQ(tree.dims(node), (ImageDims{40, 30})) << "the old version's header overwrote the new one's";
  }
}

// Under metadata_ttl, augmented/ used to trust the index for good: only raw/ and decoded/
// revalidated, so an augmented-only job kept getting variants of the old image (or EIO on every
// open) after its source file changed.
TEST(Daemon, AugmentedRevalidatesAChangedSourceFile) {
  Rig rig("probe=mount,seed=7,aug_reuse=1,render_ahead=0,metadata_ttl=0");
  Daemon d(rig.opts);
  const auto spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
  const auto& [path, jpeg] = rig.images[0];
  const std::string ppm = path.substr(0, path.size() - 4) + ".ppm";
  auto variant = [&](const std::vector<uint8_t>& from, uint32_t k) {
    transform::Rng rng = transform::Rng::for_variant(rig.opts.seed, path, k);
    return str(transform::render_augmented(from, spec, rng, transform::OutputFormat::kPpm, augment_options(rig.opts)));
  };
  Filesystem& aug = d.augmented_fs();
  EXPECT_EQ(read_file(aug, walk(aug, 1, ppm)), variant(jpeg, 0));
  // A grayscale image now: its variants have another size too.
  const std::vector<uint8_t> changed = xt::encode_jpeg(xt::synthetic_samples(80, 60, 1, 99), 80, 60, 1);
  rig.dir.write("src/" + path, std::string(changed.begin(), changed.end()));
  const uint64_t ino = walk(aug, 1, ppm);
  const std::string now = variant(changed, 1);
  EXPECT_EQ(aug.getattr(ino).size, now.size());
  EXPECT_EQ(read_file(aug, ino), now) << "an open served the old image's variant";
  EXPECT_EQ(load(d.views().changed_files), 1u);
  // The kernel's attributes of the augmented inode go too (its size may differ now).
  const std::vector<uint64_t> dropped = d.augmented_invalidations().wait(std::chrono::milliseconds(0));
  EXPECT_EQ(std::count(dropped.begin(), dropped.end(), ino), 1) << "the augmented inode kept its old attributes";
}

}  // namespace
}  // namespace prepfs
