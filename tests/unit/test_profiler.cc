// The profiler: counters driven by hand, windows of a chosen wall time, EWMAs checked by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/index/sample_shapes.h"
#include "prepfs/index/tree.h"
#include "prepfs/model/solver.h"
#include "prepfs/partition/profiler.h"
#include "prepfs/source/posix_source.h"
#include "temp_dir.h"

namespace prepfs {
namespace {

using std::chrono::seconds;
constexpr double kAlpha = 0.3;

// A tree of two images (by their recorded dimensions) and one other file, and every layer the
// profiler watches. The layers count their own work in a mount; here the test counts for them.
struct Fixture {
  test::TempDir d;
  std::unique_ptr<PosixSource> source;
  std::unique_ptr<Tree> tree;
  std::unique_ptr<TierManager> cache;
  SampleShapes shapes;
  RenderCounters renders;
  ViewCounters views;
  ReplyCounters replies;
  std::unique_ptr<Profiler> profiler;

  explicit Fixture(unsigned aug_reuse = 2) {
    d.write("src/a.jpg", std::string(1000, 'a'));
    d.write("src/b.jpg", std::string(3000, 'b'));
    d.write("src/notes.txt", "not an image");
    source = std::make_unique<PosixSource>(d / "src");
    tree = std::make_unique<Tree>(Tree::scan(*source));
    std::vector<ImageDims> dims(tree->size());
    dims[*tree->lookup(Tree::kRoot, "a.jpg")] = {640, 480};
    dims[*tree->lookup(Tree::kRoot, "b.jpg")] = {320, 200};
    tree->set_all_dims(std::move(dims));
    cache = std::make_unique<TierManager>(CacheConfig{64 << 20, 32 << 20, d / "ssd", "lru"});
    shapes.spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
    profiler = std::make_unique<Profiler>(
        ProfilerSources{*tree, shapes, *source, *cache, renders, views, replies, 64, aug_reuse, 4});
  }

  SourceCounters& src() { return source->counters(); }
  // The SSD tier exposes its counters read-only; they are plain atomics.
  RenderCounters& render() { return renders; }
  TierCounters& ssd() { return const_cast<TierCounters&>(cache->counters().ssd); }
  void tick() { profiler->tick_window(seconds(1)); }
};

bool has_note(const Profile& p, const std::string& input, bool prior) {
  return std::any_of(p.notes.begin(), p.notes.end(),
                     [&](const ProfileNote& n) { return n.input == input && n.prior == prior; });
}

double ewma(double first, double second) { return first + kAlpha * (second - first); }
// Per-operation costs weigh each of the n operations of a window (ProfilerConfig::sample_alpha).
double ewma_n(double first, double second, double n) {
  return first + (1 - std::pow(1 - ProfilerConfig{}.sample_alpha, n)) * (second - first);
}

TEST(Profiler, SizesAndCapacitiesComeFromTheTreeAndTiers) {
  Fixture f;
  model::Inputs in = f.profiler->inputs();
  EXPECT_EQ(in.samples, 2);
  EXPECT_DOUBLE_EQ(in.size_of(Form::raw), 2000);
  uint32_t a = *f.tree->lookup(Tree::kRoot, "a.jpg"), b = *f.tree->lookup(Tree::kRoot, "b.jpg");
  EXPECT_DOUBLE_EQ(in.size_of(Form::decoded),
                   double(f.shapes.decoded_size(f.tree->dims(a)) + f.shapes.decoded_size(f.tree->dims(b))) / 2);
  EXPECT_DOUBLE_EQ(in.size_of(Form::augmented), double(f.shapes.augmented_size(f.tree->dims(a))));
  EXPECT_EQ(in.ram_capacity, 64 << 20);
  EXPECT_EQ(in.ssd_capacity, 32 << 20);
  EXPECT_EQ(in.cores, 4);
  EXPECT_EQ(in.src_concurrency, 64);
  EXPECT_EQ(in.aug_reuse, 2);
}

TEST(Profiler, PriorsStandInForWhatWasNotMeasured) {
  Fixture f;
  f.tick();  // an idle window measures nothing
  Profile p = f.profiler->profile();
  model::Inputs in = p.inputs();
  EXPECT_DOUBLE_EQ(in.src_latency, 2e-3);
  EXPECT_DOUBLE_EQ(in.src_bandwidth, 100e6);
  // bench/transform/README.md: a decode 1.2 ms, a variant from the JPEG as much (crop decode), a
  // variant from cached pixels 0.12 of that.
  EXPECT_DOUBLE_EQ(in.c_dec, 1.2e-3);
  EXPECT_DOUBLE_EQ(in.c_aug, 0);
  EXPECT_DOUBLE_EQ(in.c_aug_from_decoded, 0.12 * 1.2e-3);
  EXPECT_EQ(in.view, Form::raw) << "before any request";
  // Never 0 (which the model reads as "free"): a stated prior until measured.
  EXPECT_DOUBLE_EQ(in.ssd_read_bw, 500e6);
  EXPECT_DOUBLE_EQ(in.ssd_write_bw, 300e6);
  EXPECT_DOUBLE_EQ(in.copy_bw, 2e9 * in.cores);
  for (const char* input : {"src_latency", "src_bandwidth", "c_dec", "c_aug", "c_aug_from_decoded", "ssd_read_bw",
                            "ssd_write_bw", "copy_bw"})
    EXPECT_TRUE(has_note(p, input, true)) << input;
}

// Issue 13: for augmented consumers the placement keeps decoded pixels when they fit, and
// variants render from them. Before any render is measured that rests on the priors alone: a
// variant from cached pixels (0.12 of a variant from the JPEG) must beat even a variant reused 4
// times (a quarter of a full render per request). With the old priors (0.45) it did not.
TEST(Profiler, WithThePriorsAnAugmentedViewIsPlannedDecodedWhenItFits) {
  for (unsigned reuse : {1u, 2u, 4u}) {
    SCOPED_TRACE(reuse);
    Fixture f(reuse);
    bump(f.views.augmented_opens, 10);
    f.tick();
    const model::Inputs in = f.profiler->inputs();
    ASSERT_EQ(in.view, Form::augmented);
    ASSERT_GE(in.ram_capacity, in.samples * in.size_of(Form::decoded)) << "the decoded pixels fit in RAM";
    const model::Plan plan = model::solve(in);
    EXPECT_EQ(plan.placement.at(Form::decoded, Tier::ram), in.samples) << model::explain(in, plan);
    EXPECT_EQ(plan.placement.total(), in.samples);
  }
}

TEST(Profiler, SourceLatencyAndConcurrencyAreEwmasOfEachWindow) {
  Fixture f;
  bump(f.src().reads, 10);
  bump(f.src().read_ns, 20'000'000);  // 2 ms a read
  bump(f.src().bytes, 1'000'000);
  f.tick();
  Profile p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.src_latency, 2e-3);
  EXPECT_DOUBLE_EQ(p.src_concurrency_in_use, 0.02);  // 20 ms of reads in 1 s of wall time
  EXPECT_DOUBLE_EQ(p.src_stream_bw, 50e6);           // 1 MB in 20 ms of request time
  EXPECT_DOUBLE_EQ(p.src_peak_bw, 1e6);              // 1 MB in 1 s of wall time
  EXPECT_DOUBLE_EQ(p.src_bandwidth, 50e6);
  EXPECT_FALSE(has_note(p, "src_latency", true));
  EXPECT_FALSE(has_note(p, "src_bandwidth", true));

  bump(f.src().reads, 10);
  bump(f.src().read_ns, 40'000'000);  // 4 ms a read
  bump(f.src().bytes, 1'000'000);
  f.tick();
  p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.src_latency, ewma_n(2e-3, 4e-3, 10));  // ten reads of 4 ms
  EXPECT_DOUBLE_EQ(p.src_concurrency_in_use, ewma(0.02, 0.04));

  f.tick();  // idle: latency and concurrency describe the source in use, so they stay
  Profile idle = f.profiler->profile();
  EXPECT_DOUBLE_EQ(idle.src_latency, p.src_latency);
  EXPECT_DOUBLE_EQ(idle.src_concurrency_in_use, p.src_concurrency_in_use);
  EXPECT_EQ(idle.inputs().src_concurrency, 64) << "the model is given the allowed concurrency";
}

TEST(Profiler, BandwidthIsAHeldPeakThatDecaysSlowly) {
  Fixture f;
  // 100 MB in one second with 10 s of request time: many requests in flight, each slow.
  bump(f.src().reads, 100);
  bump(f.src().read_ns, 10'000'000'000);
  bump(f.src().bytes, 100'000'000);
  f.tick();
  Profile p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.src_stream_bw, 10e6);
  EXPECT_DOUBLE_EQ(p.src_bandwidth, 100e6);

  f.tick();  // idle: the peak decays by 1%, no more
  EXPECT_DOUBLE_EQ(f.profiler->profile().src_bandwidth, 99e6);

  bump(f.src().reads, 50);
  bump(f.src().read_ns, 5'000'000'000);
  bump(f.src().bytes, 50'000'000);
  f.tick();  // a lighter window does not lower the bound below the decayed peak
  EXPECT_DOUBLE_EQ(f.profiler->profile().src_bandwidth, 99e6 * 0.99);

  bump(f.src().reads, 100);
  bump(f.src().read_ns, 10'000'000'000);
  bump(f.src().bytes, 200'000'000);
  f.tick();  // a heavier one raises it at once
  EXPECT_DOUBLE_EQ(f.profiler->profile().src_bandwidth, 200e6);

  for (int i = 0; i < 300; i++) f.tick();  // five idle minutes: the burst is mostly forgotten...
  p = f.profiler->profile();
  EXPECT_LT(p.src_peak_bw, 200e6 * 0.05);
  EXPECT_DOUBLE_EQ(p.src_bandwidth, std::max(p.src_stream_bw, p.src_peak_bw)) << "...down to one request's rate";
}

TEST(Profiler, SsdReadIsALowerBoundAndWriteIsTheWritersRate) {
  Fixture f;
  bump(f.ssd().read_bytes, 8'000'000);
  bump(f.ssd().read_ns, 4'000'000);  // 2 GB/s per read
  bump(f.ssd().write_bytes, 4'000'000);
  bump(f.ssd().write_ns, 8'000'000);  // 500 MB/s while writing
  f.tick();
  Profile p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.ssd_read_stream_bw, 2e9);
  EXPECT_DOUBLE_EQ(p.ssd_read_peak_bw, 8e6);
  EXPECT_DOUBLE_EQ(p.ssd_read_bw, 2e9);
  EXPECT_DOUBLE_EQ(p.ssd_write_bw, 500e6);
  EXPECT_FALSE(has_note(p, "ssd_read_bw", true));
  EXPECT_FALSE(has_note(p, "ssd_write_bw", true));

  // Many parallel reads: the aggregate rate beats one read's.
  bump(f.ssd().read_bytes, 3'000'000'000);
  bump(f.ssd().read_ns, 6'000'000'000);
  f.tick();
  p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.ssd_read_stream_bw, ewma(2e9, 0.5e9));
  EXPECT_DOUBLE_EQ(p.ssd_read_bw, 3e9);
  EXPECT_DOUBLE_EQ(p.ssd_write_bw, 500e6) << "no writes in the window: unchanged";
}

TEST(Profiler, CpuCostsPerSampleAndTheirDifference) {
  Fixture f;
  bump(f.render().decoded, 4);
  bump(f.render().decode_cpu_ns, 8'000'000);  // 2 ms
  bump(f.render().augmented, 10);
  bump(f.render().from_decoded, 5);
  bump(f.render().augment_cpu_ns, 25'000'000);              // 5 renders from JPEG: 5 ms each
  bump(f.render().augment_from_decoded_cpu_ns, 5'000'000);  // 1 ms each
  f.tick();
  Profile p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.c_dec, 2e-3);
  EXPECT_DOUBLE_EQ(p.c_aug_from_jpeg, 5e-3);
  EXPECT_DOUBLE_EQ(p.c_aug, 3e-3);
  EXPECT_DOUBLE_EQ(p.c_aug_from_decoded, 1e-3);
  for (const char* input : {"c_dec", "c_aug", "c_aug_from_decoded"}) EXPECT_FALSE(has_note(p, input, true)) << input;

  bump(f.render().decoded, 1);
  bump(f.render().decode_cpu_ns, 30'000'000);  // one slow decode: 30 ms
  f.tick();
  p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.c_dec, ewma_n(2e-3, 30e-3, 1)) << "one render moves the estimate by one render's weight";
  EXPECT_LT(p.c_dec, 2.5e-3);

  bump(f.render().decoded, 1000);
  bump(f.render().decode_cpu_ns, 6'000'000'000);  // a thousand decodes of 6 ms: they take over
  f.tick();
  p = f.profiler->profile();
  EXPECT_NEAR(p.c_dec, 6e-3, 1e-6);
  // Not floored: c_dec + c_aug stays the measured augmented miss (reduced-scale decodes can make
  // an augmented render cheaper than a decoded/ render).
  EXPECT_DOUBLE_EQ(p.c_dec + p.c_aug, p.c_aug_from_jpeg);
  EXPECT_LT(p.c_aug, 0);
}

TEST(Profiler, OnlyAugmentFromJpegMeasuredGivesAPriorForDecode) {
  Fixture f;
  bump(f.render().augmented, 2);
  bump(f.render().augment_cpu_ns, 10'000'000);
  f.tick();
  Profile p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.c_dec, 5e-3);
  EXPECT_DOUBLE_EQ(p.c_aug, 0);
  EXPECT_DOUBLE_EQ(p.c_aug_from_decoded, 0.12 * 5e-3);
  EXPECT_TRUE(has_note(p, "c_dec", true));
  EXPECT_FALSE(has_note(p, "c_aug", true));
}

// Issue 13: a cost the plan stops exercising must not pin the plan. Renders from pixels measured
// once at a third of a render from the JPEG (under load), then none for stale_ticks: c_aug'
// follows the JPEG cost measured since at that ratio, and the ratio ages toward the prior.
TEST(Profiler, AnUnexercisedAugmentFromPixelsCostFollowsTheJpegCostAndAgesTowardThePrior) {
  Fixture f;
  bump(f.render().augmented, 1000);
  bump(f.render().augment_cpu_ns, 1'000'000'000);  // 1 ms from the JPEG
  f.tick();
  bump(f.render().augmented, 1000);
  bump(f.render().from_decoded, 1000);
  bump(f.render().augment_from_decoded_cpu_ns, 400'000'000);  // 0.4 ms from pixels, measured under load
  f.tick();
  Profile p = f.profiler->profile();
  EXPECT_NEAR(p.c_aug_from_decoded, 0.4e-3, 1e-9);
  const ProfilerConfig cfg;
  for (uint64_t t = 1; t < cfg.stale_ticks; t++) f.tick();
  p = f.profiler->profile();
  EXPECT_NEAR(p.c_aug_from_decoded, 0.4e-3, 1e-9) << "not stale yet";
  EXPECT_FALSE(has_note(p, "c_aug_from_decoded", true));

  bump(f.render().augmented, 1000);
  bump(f.render().augment_cpu_ns, 500'000'000);  // the machine got quieter: 0.5 ms from the JPEG
  f.tick();
  p = f.profiler->profile();
  const double ratio = 0.4;  // 0.4 ms / 1 ms when last measured
  EXPECT_NEAR(p.c_aug_from_decoded / p.c_aug_from_jpeg, ratio, 0.01);
  EXPECT_LT(p.c_aug_from_decoded, 0.21e-3) << "did not follow the cost from the JPEG";
  EXPECT_TRUE(has_note(p, "c_aug_from_decoded", true));

  for (uint64_t t = 0; t < uint64_t(cfg.stale_half_life_ticks); t++) f.tick();
  p = f.profiler->profile();
  const double share = ProfilerPriors::kAugmentFromDecodedShare;
  const double aged = share + 0.5 * (ratio - share);  // one half-life more (plus the tick above)
  EXPECT_NEAR(p.c_aug_from_decoded / p.c_aug_from_jpeg, aged, 0.01);
  for (uint64_t t = 0; t < 20 * uint64_t(cfg.stale_half_life_ticks); t++) f.tick();
  EXPECT_NEAR(f.profiler->profile().c_aug_from_decoded / p.c_aug_from_jpeg, share, 1e-4);

  bump(f.render().augmented, 1000);  // rendered from pixels again: measured, no longer aged
  bump(f.render().from_decoded, 1000);
  bump(f.render().augment_from_decoded_cpu_ns, 300'000'000);
  f.tick();
  p = f.profiler->profile();
  EXPECT_FALSE(has_note(p, "c_aug_from_decoded", true));
  EXPECT_GT(p.c_aug_from_decoded, 0.29e-3);
}

TEST(Profiler, CopyBandwidthIsOneThreadsRateTimesTheCores) {
  Fixture f;
  bump(f.replies.bytes, 1'000'000'000);
  bump(f.replies.ns, 500'000'000);
  f.tick();
  Profile p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.copy_call_bw, 2e9);
  EXPECT_DOUBLE_EQ(p.copy_bw, 8e9);
  EXPECT_DOUBLE_EQ(p.inputs().copy_bw, 8e9);
  EXPECT_FALSE(has_note(p, "copy_bw", true));
}

TEST(Profiler, ViewMixAndDominantView) {
  Fixture f;
  bump(f.views.augmented_opens, 9);
  bump(f.views.decoded_samples, 1);
  f.tick();
  Profile p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.view_share[0], 0);
  EXPECT_DOUBLE_EQ(p.view_share[1], 0.1);
  EXPECT_DOUBLE_EQ(p.view_share[2], 0.9);
  EXPECT_EQ(p.view, Form::augmented);

  bump(f.views.raw_samples, 10);
  f.tick();  // one window of raw reads moves the mix by alpha, not all the way
  p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.view_share[0], 0.3);
  EXPECT_DOUBLE_EQ(p.view_share[2], 0.9 * 0.7);
  EXPECT_EQ(p.view, Form::augmented);

  f.tick();  // idle windows leave the mix alone
  EXPECT_DOUBLE_EQ(f.profiler->profile().view_share[0], 0.3);

  for (int i = 0; i < 3; i++) {
    bump(f.views.raw_samples, 10);
    f.tick();
  }
  EXPECT_EQ(f.profiler->inputs().view, Form::raw);
}

// Two jobs at about the same rate on two views: the dominant view must not flip tick after tick
// (each flip re-plans, and a plan for another view can move the whole cache). It was the plain
// argmax of the shares, which a 55/45 mix swapping sides flipped every tick.
TEST(Profiler, ANearEvenMixOfTwoViewsDoesNotFlipTheDominantView) {
  Fixture f;
  int flips = 0;
  Form last = Form::raw;
  for (int i = 0; i < 30; i++) {
    bump(f.views.raw_samples, i % 2 ? 55 : 45);
    bump(f.views.decoded_samples, i % 2 ? 45 : 55);
    f.tick();
    const Form now = f.profiler->profile().view;
    if (i > 0 && now != last) flips++;
    last = now;
  }
  EXPECT_EQ(flips, 0);
  // A clear change of the mix still moves it.
  for (int i = 0; i < 5; i++) {
    bump(f.views.raw_samples, 90);
    bump(f.views.decoded_samples, 10);
    f.tick();
  }
  EXPECT_EQ(f.profiler->profile().view, Form::raw);
  for (int i = 0; i < 5; i++) {
    bump(f.views.raw_samples, 10);
    bump(f.views.decoded_samples, 90);
    f.tick();
  }
  EXPECT_EQ(f.profiler->profile().view, Form::decoded);
}

TEST(Profiler, ThreadTicksAndRunsCallbacksUntilStopped) {
  Fixture f;
  std::atomic<int> calls{0};
  f.profiler->on_tick([&] { calls++; });
  f.profiler->on_tick([] { throw std::runtime_error("a failing callback is logged, not fatal"); });
  f.profiler->start(std::chrono::milliseconds(5));
  while (calls < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  f.profiler->stop();
  int after = calls;
  EXPECT_GE(f.profiler->profile().ticks, 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(calls, after) << "no tick after stop()";
  f.profiler->stop();  // twice is fine
}

// The planner's payback horizon counts epochs from this: every view's samples since mount, not
// a window, and not only the view that dominates the mix.
TEST(Profiler, SamplesServedSumsEveryViewSinceMount) {
  Fixture f;
  EXPECT_EQ(f.profiler->samples_served(), 0u);
  bump(f.views.raw_samples, 7);
  bump(f.views.decoded_samples, 5);
  bump(f.views.augmented_opens, 11);
  f.tick();
  EXPECT_EQ(f.profiler->samples_served(), 23u);
  f.tick();  // an idle window takes nothing away
  bump(f.views.augmented_opens, 2);
  EXPECT_EQ(f.profiler->samples_served(), 25u);  // read now, not at the last tick
}

}  // namespace

TEST(Profiler, BusyTimeBoundsTheBandwidthOfAPartlyIdleSource) {
  Fixture f;
  // 30 MB in a one-second window, but the source had reads in flight only half of it.
  bump(f.src().reads, 30);
  bump(f.src().read_ns, 600'000'000);
  bump(f.src().bytes, 30'000'000);
  bump(f.src().busy_ns, 500'000'000);
  f.tick();
  Profile p = f.profiler->profile();
  EXPECT_DOUBLE_EQ(p.src_peak_bw, 30e6);
  EXPECT_DOUBLE_EQ(p.src_busy_bw, 60e6);
  EXPECT_DOUBLE_EQ(p.src_bandwidth, 60e6);
}

TEST(SourceBusy, CountsTimeWithAReadInFlightOnceHoweverManyOverlap) {
  SourceCounters c;
  const uint64_t t0 = steady_ns();
  {
    SourceBusy a(c);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
      SourceBusy b(c);  // overlapping: no extra busy time
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_GE(busy_ns_now(c), 40'000'000u) << "the open period counts before it closes";
  }
  const uint64_t span = steady_ns() - t0, closed = load(c.busy_ns);
  EXPECT_GE(closed, 40'000'000u);
  EXPECT_LE(closed, span) << "counted once, not per read (that would be about 1.5 x the span)";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // idle: nothing accrues
  EXPECT_EQ(busy_ns_now(c), closed);
}

}  // namespace prepfs
