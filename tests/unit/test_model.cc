// The partition model (docs/MODEL.md): equations on hand-computed cases, the exact solver against
// brute force, the single-form alternatives, drift detection and the EWMA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "prepfs/model/drift.h"
#include "prepfs/model/ewma.h"
#include "prepfs/model/inputs.h"
#include "prepfs/model/partition.h"
#include "prepfs/model/solver.h"

using namespace prepfs::model;
using prepfs::Form;
using prepfs::Tier;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A machine with round numbers, used by the hand-computed cases.
Inputs base_inputs() {
  Inputs in;
  in.size = {100e3, 600e3, 150e3};  // raw, decoded, augmented
  in.samples = 1000;
  in.ram_capacity = 1e9;
  in.ssd_capacity = 1e9;
  in.src_bandwidth = 100e6;
  in.src_latency = 0.01;
  in.src_concurrency = 10;  // 1000 requests/s
  in.ssd_read_bw = 1e9;
  in.ssd_write_bw = 5e8;
  in.c_dec = 0.004;
  in.c_aug = 0.002;
  in.c_aug_from_decoded = 0.001;
  in.cores = 4;
  in.copy_bw = 1e9;
  in.view = Form::augmented;
  in.aug_reuse = 1;
  return in;
}

double rate_of(const Prediction& p, Resource r) { return p.rate[static_cast<std::size_t>(r)]; }

}  // namespace

// Case 1: nothing cached. Every request is a miss:
//   cpu    c_dec + c_aug = 0.006 s        -> 4 / 0.006      = 666.67/s
//   source 100e3 B                        -> 100e6 / 100e3  = 1000/s
//   reqs   1                              -> 10 / 0.01      = 1000/s
//   copy   S_aug = 150e3 B                -> 1e9 / 150e3    = 6666.67/s
//   ssd    0                              -> unlimited
// Throughput 666.67/s, bound by cpu.
TEST(ModelEquations, NoCache) {
  const Inputs in = base_inputs();
  const Prediction p = predict(in, Placement{});
  EXPECT_NEAR(p.usage.cpu_s, 0.006, 1e-12);
  EXPECT_NEAR(p.usage.source_bytes, 100e3, 1e-6);
  EXPECT_NEAR(p.usage.source_requests, 1, 1e-12);
  EXPECT_NEAR(p.usage.copy_bytes, 150e3, 1e-6);
  EXPECT_EQ(p.usage.ssd_read_bytes, 0);
  EXPECT_NEAR(rate_of(p, Resource::kCpu), 4 / 0.006, 1e-6);
  EXPECT_NEAR(rate_of(p, Resource::kSourceBytes), 1000, 1e-6);
  EXPECT_NEAR(rate_of(p, Resource::kSourceRequests), 1000, 1e-6);
  EXPECT_NEAR(rate_of(p, Resource::kCopy), 1e9 / 150e3, 1e-6);
  EXPECT_EQ(rate_of(p, Resource::kSsd), kInf);
  EXPECT_EQ(rate_of(p, Resource::kConsumer), kInf);
  EXPECT_NEAR(p.throughput, 666.6666667, 1e-6);
  EXPECT_EQ(p.binding, Resource::kCpu);
}

// Case 2: 500 raw in RAM, 250 decoded on SSD, 250 uncached (probabilities .5, .25, .25):
//   cpu    .5*0.006 + .25*0.001 + .25*0.006 = 0.00475 s -> 4 / 0.00475 = 842.105/s
//   ssd    read .25*600e3 = 150e3 B at 1e9 B/s          -> 6666.67/s
//   source .25*100e3 = 25e3 B                           -> 4000/s
//   reqs   .25                                          -> 4000/s
//   copy   150e3 B                                      -> 6666.67/s
// Throughput 842.105/s, bound by cpu.
TEST(ModelEquations, MixedPlacement) {
  const Inputs in = base_inputs();
  Placement pl;
  pl.at(Form::raw, Tier::ram) = 500;
  pl.at(Form::decoded, Tier::ssd) = 250;
  ASSERT_TRUE(feasible(in, pl));
  const Prediction p = predict(in, pl);
  EXPECT_NEAR(p.usage.cpu_s, 0.00475, 1e-12);
  EXPECT_NEAR(p.usage.ssd_read_bytes, 150e3, 1e-6);
  EXPECT_NEAR(p.usage.ssd_write_bytes, 0, 1e-9);
  EXPECT_NEAR(p.usage.source_bytes, 25e3, 1e-6);
  EXPECT_NEAR(p.usage.source_requests, 0.25, 1e-12);
  EXPECT_NEAR(rate_of(p, Resource::kSsd), 1e9 / 150e3, 1e-6);
  EXPECT_NEAR(rate_of(p, Resource::kSourceBytes), 4000, 1e-6);
  EXPECT_NEAR(p.throughput, 4 / 0.00475, 1e-6);
  EXPECT_EQ(p.binding, Resource::kCpu);
}

// Case 3: slow source (10e6 B/s), aug_reuse R = 4, all 1000 samples augmented on SSD.
// A variant serves 4 requests: one regenerates it (a miss plus an SSD write), three read it.
//   cpu    0.006 / 4 = 0.0015 s                         -> 2666.67/s
//   source 100e3 / 4 = 25e3 B                           -> 10e6 / 25e3 = 400/s
//   reqs   1/4                                          -> 4000/s
//   ssd    read 150e3*3/4 = 112.5e3 B -> 112.5e-6 s, write 150e3/4 = 37.5e3 B at 5e8 -> 75e-6 s;
//          187.5e-6 s                                   -> 5333.33/s
//   copy   150e3                                        -> 6666.67/s
// Throughput 400/s, bound by source bandwidth. The same in RAM: copy 150e3 + 37.5e3 = 187.5e3 B.
TEST(ModelEquations, AugmentedWithReuse) {
  Inputs in = base_inputs();
  in.src_bandwidth = 10e6;
  in.aug_reuse = 4;
  Placement pl;
  pl.at(Form::augmented, Tier::ssd) = 1000;
  const Prediction p = predict(in, pl);
  EXPECT_NEAR(p.usage.cpu_s, 0.0015, 1e-12);
  EXPECT_NEAR(p.usage.source_bytes, 25e3, 1e-6);
  EXPECT_NEAR(p.usage.source_requests, 0.25, 1e-12);
  EXPECT_NEAR(p.usage.ssd_read_bytes, 112.5e3, 1e-6);
  EXPECT_NEAR(p.usage.ssd_write_bytes, 37.5e3, 1e-6);
  EXPECT_NEAR(rate_of(p, Resource::kSsd), 1 / 187.5e-6, 1e-6);
  EXPECT_NEAR(rate_of(p, Resource::kCpu), 4 / 0.0015, 1e-6);
  EXPECT_NEAR(p.throughput, 400, 1e-9);
  EXPECT_EQ(p.binding, Resource::kSourceBytes);

  Placement ram;
  ram.at(Form::augmented, Tier::ram) = 1000;
  const Prediction q = predict(in, ram);
  EXPECT_NEAR(q.usage.copy_bytes, 187.5e3, 1e-6);
  EXPECT_EQ(q.usage.ssd_write_bytes, 0);
  EXPECT_NEAR(q.throughput, 400, 1e-9);
}

// Issue 13: with aug_reuse R = 4 a sample kept decoded in RAM keeps its variant of the moment
// beside the pixels until the variant's last serve, so one request in 4 renders from the pixels:
//   cpu    0.001 / 4 = 0.00025 s      -> 16000/s
//   copy   150e3 + 150e3 / 4 = 187.5e3 B (the variant's store, as for a variant in RAM)
// and each such slot holds S_dec + S_aug = 750e3 B of RAM. On the SSD the pixels serve alone.
TEST(ModelEquations, AVariantRidesBesideDecodedPixelsInRam) {
  Inputs in = base_inputs();
  in.aug_reuse = 4;
  Placement pl;
  pl.at(Form::decoded, Tier::ram) = 1000;
  const Prediction p = predict(in, pl);
  EXPECT_NEAR(p.usage.cpu_s, 0.00025, 1e-12);
  EXPECT_NEAR(p.usage.copy_bytes, 187.5e3, 1e-6);
  EXPECT_NEAR(pl.bytes(in, Tier::ram), 1000 * 750e3, 1e-3);
  EXPECT_DOUBLE_EQ(in.slot_size(Form::decoded, Tier::ssd), 600e3);

  Placement ssd;
  ssd.at(Form::decoded, Tier::ssd) = 1000;
  EXPECT_NEAR(predict(in, ssd).usage.cpu_s, 0.001, 1e-12);

  in.aug_reuse = 1;  // a variant per open: nothing rides beside the pixels
  EXPECT_NEAR(predict(in, pl).usage.cpu_s, 0.001, 1e-12);
  EXPECT_NEAR(pl.bytes(in, Tier::ram), 1000 * 600e3, 1e-3);
  in.aug_reuse = 4;
  in.view = Form::decoded;  // decoded/ readers: no variants at all
  EXPECT_NEAR(pl.bytes(in, Tier::ram), 1000 * 600e3, 1e-3);
}

// And the plan therefore keeps pixels (with their variant) rather than variants rendered from the
// JPEG, even where a render from pixels costs a third of one from the JPEG (measured under load):
// R = 4 variants cost c_full / 4 = 1.5 ms / 4 per request, pixels 0.5 ms / 4.
TEST(Solver, AtAugReuseFourPixelsWithTheirVariantBeatCachedVariants) {
  Inputs in = base_inputs();
  in.aug_reuse = 4;
  in.c_dec = 0.001;
  in.c_aug = 0.0005;
  in.c_aug_from_decoded = 0.0005;
  in.ssd_capacity = 0;
  in.ram_capacity = 2e9;  // room for everything either way
  in.copy_bw = 1e12;      // the CPU binds, not the copy of the replies
  const Placement p = solve(in).placement;
  EXPECT_NEAR(p.at(Form::decoded, Tier::ram), 1000, 1);
  EXPECT_NEAR(p.at(Form::augmented, Tier::ram), 0, 1);
}

// The free room (MODEL.md): the RAM a placement leaves free holds the recent fills. Nothing
// cached, aug_reuse 2, 1 GB of RAM: every variant (150e3 B) and every sample's bytes (100e3 B) fit,
// so each variant is still there at its second serve and no render fetches:
//   cpu    0.006 / 2 = 0.003 s            -> 1333.33/s (the placement alone: 666.67/s)
//   source 0
TEST(FreeRoom, NothingCachedAndEverythingFitsRendersEachVariantOnce) {
  Inputs in = base_inputs();
  in.aug_reuse = 2;
  const FreeRoom fr = free_room(in, Placement{});
  EXPECT_DOUBLE_EQ(fr.room, 1e9);
  EXPECT_DOUBLE_EQ(fr.variant_survival, 1);
  EXPECT_DOUBLE_EQ(fr.raw_survival, 1);
  EXPECT_DOUBLE_EQ(fr.renders, 0.5);
  EXPECT_NEAR(fr.touched, 75e3 + 50e3, 1e-6);  // half a variant and half a sample's bytes per request
  const Prediction p = predict_with_free_room(in, Placement{});
  EXPECT_NEAR(p.usage.cpu_s, 0.003, 1e-12);
  EXPECT_NEAR(p.usage.source_bytes, 0, 1e-6);
  EXPECT_NEAR(p.throughput, 4 / 0.003, 1e-6);
  EXPECT_NEAR(predict(in, Placement{}).throughput, 4 / 0.006, 1e-6);  // what the planner compares
}

// The gap between two serves of a sample in consecutive shuffled epochs is U1 + U2 requests, each
// uniform on [0, N]; an entry survives when fewer than `room` bytes are put after it. raw/ view,
// nothing cached, no RAM budget but a 25e6 B floor, 100e3 B put per request: it survives a gap
// of at most 250 requests, P = 250^2 / (2 * 1000^2) = 0.03125, so the source serves 96875 B per
// request. With a 150e6 B floor: 1500 requests, P = 1 - 500^2 / (2 * 1000^2) = 0.875.
TEST(FreeRoom, SurvivalFollowsTheGapBetweenTwoShuffledEpochs) {
  Inputs in = base_inputs();
  in.view = Form::raw;
  in.ram_capacity = 0;
  in.recent_floor = 25e6;
  FreeRoom fr = free_room(in, Placement{});
  EXPECT_DOUBLE_EQ(fr.room, 25e6);
  EXPECT_NEAR(fr.raw_survival, 0.03125, 1e-12);
  Prediction p = predict_with_free_room(in, Placement{});
  EXPECT_NEAR(p.usage.source_bytes, 96875, 1e-6);
  EXPECT_NEAR(p.usage.source_requests, 0.96875, 1e-12);
  EXPECT_NEAR(p.throughput, 100e6 / 96875, 1e-6);
  in.recent_floor = 150e6;
  EXPECT_NEAR(free_room(in, Placement{}).raw_survival, 0.875, 1e-12);
  in.recent_floor = 0;  // no room at all: the placement alone
  EXPECT_DOUBLE_EQ(predict_with_free_room(in, Placement{}).throughput, predict(in, Placement{}).throughput);
}

// The placement's entries take the budget first. 1000 raw samples fill 100e6 B of RAM; aug_reuse 2;
// the variants (no tier keeps them) have only the floor, 37.5e6 B. They are put at their first
// serve, half a variant (75e3 B) per request, so one survives 500 requests: P = 500^2 / (2 * 1000^2)
// = 0.125, and a request renders (1 + (1 - 0.125)) / 2 = 0.9375 times: cpu 0.006 * 0.9375.
TEST(FreeRoom, ThePlacementsEntriesTakeTheBudgetFirst) {
  Inputs in = base_inputs();
  in.aug_reuse = 2;
  in.ram_capacity = 100e6;
  Placement pl;
  pl.at(Form::raw, Tier::ram) = 1000;
  in.recent_floor = 0;
  EXPECT_DOUBLE_EQ(free_room(in, pl).room, 0);
  EXPECT_DOUBLE_EQ(predict_with_free_room(in, pl).usage.cpu_s, predict(in, pl).usage.cpu_s);
  in.recent_floor = 37.5e6;
  const FreeRoom fr = free_room(in, pl);
  EXPECT_DOUBLE_EQ(fr.room, 37.5e6);
  EXPECT_NEAR(fr.variant_survival, 0.125, 1e-12);
  EXPECT_NEAR(fr.renders, 0.9375, 1e-12);
  EXPECT_NEAR(predict_with_free_room(in, pl).usage.cpu_s, 0.006 * 0.9375, 1e-12);
  // A placed variant, or one beside its pixels, is held R-1 of every R gaps between serves.
  Placement dec;
  dec.at(Form::decoded, Tier::ram) = 100;
  in.ram_capacity = 1e9;
  EXPECT_DOUBLE_EQ(free_room(in, dec).room, 1e9 - 100 * (600e3 + 150e3 / 2));
}

// A placed variant's refill (one serve in R = 2) fetches the sample's bytes, which wait among the
// recent fills too: 1000 variants in RAM hold 1000 * 150e3 / 2 B on average, 50e3 B of bytes are
// put per request, and the room (925e6 B) outlasts a gap of two epochs (at most 3N requests): no
// fetch, where the placement alone fetches 100e3 / 2 B per request.
TEST(FreeRoom, APlacedVariantsRefillFindsItsBytes) {
  Inputs in = base_inputs();
  in.aug_reuse = 2;
  Placement pl;
  pl.at(Form::augmented, Tier::ram) = 1000;
  const FreeRoom fr = free_room(in, pl);
  EXPECT_DOUBLE_EQ(fr.room, 1e9 - 1000 * 75e3);
  EXPECT_NEAR(fr.touched, 50e3, 1e-6);
  EXPECT_DOUBLE_EQ(fr.refill_raw_survival, 1);
  EXPECT_NEAR(predict(in, pl).usage.source_bytes, 50e3, 1e-6);
  EXPECT_NEAR(predict_with_free_room(in, pl).usage.source_bytes, 0, 1e-6);
  EXPECT_NEAR(predict_with_free_room(in, pl).usage.cpu_s, predict(in, pl).usage.cpu_s, 1e-12);  // refills still render
}

// A partial survival is a fixed point: a lost variant is rendered and put again, which puts more
// bytes, which loses more. Checked against the definitions, computed here independently: the
// room is the whole budget (ram_budget, not the planning share) less what the entries hold; the
// bytes put per request count the variants outside the tiers, the bytes of uncached samples and
// of raw samples on the SSD per render, placed variants' refills, and not pixels read from the
// SSD (a render looks them up without keeping them).
TEST(FreeRoom, APartialSurvivalIsTheLeastFixedPoint) {
  Inputs in = base_inputs();
  in.aug_reuse = 3;
  in.ram_capacity = 0.95 * 200e6;
  in.ram_budget = 200e6;
  Placement pl;
  pl.at(Form::raw, Tier::ram) = 100;       // 10e6 B
  pl.at(Form::decoded, Tier::ram) = 50;    // 50 * (600e3 + 150e3 * 2/3) = 35e6 B
  pl.at(Form::augmented, Tier::ram) = 100;  // 100 * 150e3 * 2/3 = 10e6 B
  pl.at(Form::raw, Tier::ssd) = 100;
  pl.at(Form::decoded, Tier::ssd) = 100;
  pl.at(Form::augmented, Tier::ssd) = 100;  // 450 uncached
  const FreeRoom fr = free_room(in, pl);
  EXPECT_DOUBLE_EQ(fr.room, 200e6 - 10e6 - 35e6 - 10e6);
  const double n = 1000, r = 3, miss = 0.45;
  const double outside = miss + 0.1 + 0.1 + 0.1;  // uncached, raw in RAM, raw on SSD, pixels on SSD
  auto tri = [&](double t) {
    return t <= 0 ? 0.0 : t <= n ? t * t / (2 * n * n) : t < 2 * n ? 1 - (2 * n - t) * (2 * n - t) / (2 * n * n) : 1.0;
  };
  const double h = fr.variant_survival, rho = fr.renders;
  EXPECT_GT(h, 0.05);
  EXPECT_LT(h, 0.95);
  EXPECT_NEAR(rho, (1 + (r - 1) * (1 - h)) / r, 1e-12);
  const double put = outside * 150e3 * (r - 1) / r + (miss + 0.1) * 100e3 * rho + 0.1 * 150e3 * (r - 1) / r +
                     0.2 * 100e3 / r;
  EXPECT_NEAR(fr.touched, put, 1e-6);
  EXPECT_NEAR(h, tri(fr.room / put), 1e-9);  // a fixed point ...
  EXPECT_NEAR(fr.raw_survival, tri(fr.room / put - (1 / rho - 1) * n), 1e-9);
  EXPECT_NEAR(fr.refill_raw_survival, tri(fr.room / put - (r - 1) * n), 1e-9);
}

// Where the survival has two fixed points, the model takes the least: a cold cache climbs from
// nothing kept, and reaches the greater one only if something lifts it past the gap between. Big
// JPEGs, small variants, R = 10, nothing placed: each request puts 135e3 B of variant and 1e6 B of
// raw bytes per render, renders(h) = (1 + 9 (1 - h)) / 10. At h = 1, 235e3 B a request: the room
// outlasts every gap (2N requests), a second fixed point.
TEST(FreeRoom, OfTwoFixedPointsTheSurvivalIsTheLeast) {
  Inputs in = base_inputs();
  in.size = {1e6, 600e3, 150e3};
  in.aug_reuse = 10;
  in.ram_capacity = 500e6;
  in.ram_budget = 500e6;
  const FreeRoom fr = free_room(in, Placement{});
  EXPECT_DOUBLE_EQ(fr.room, 500e6);
  const double n = 1000, r = 10;
  auto tri = [&](double t) {
    return t <= 0 ? 0.0 : t <= n ? t * t / (2 * n * n) : t < 2 * n ? 1 - (2 * n - t) * (2 * n - t) / (2 * n * n) : 1.0;
  };
  auto next = [&](double h) { return tri(500e6 / (150e3 * (r - 1) / r + 1e6 * (1 + (r - 1) * (1 - h)) / r)); };
  // The map only rises with h: from 0 it climbs to the least fixed point, from 1 the greatest.
  double lower = 0, upper = 1;
  for (int i = 0; i < 2000; i++) {
    lower = next(lower);
    upper = next(upper);
  }
  ASSERT_NEAR(next(lower), lower, 1e-12);
  ASSERT_GT(upper, lower + 0.5) << "one fixed point only: the case cannot tell the least from another";
  EXPECT_NEAR(fr.variant_survival, lower, 1e-9);
}

// decoded/ readers: the pixels of the samples no tier keeps are among the recent fills after their
// serve. Nothing cached, 3 GB of RAM: at most 700e3 B put per request, so the room outlasts any gap
// (2N = 2000 requests); no decode, no fetch; each serve copies 600e3 B.
TEST(FreeRoom, DecodedViewKeepsPixels) {
  Inputs in = base_inputs();
  in.view = Form::decoded;
  in.ram_capacity = 3e9;
  const FreeRoom fr = free_room(in, Placement{});
  EXPECT_DOUBLE_EQ(fr.decoded_survival, 1);
  const Prediction p = predict_with_free_room(in, Placement{});
  EXPECT_NEAR(p.usage.cpu_s, 0, 1e-12);
  EXPECT_NEAR(p.usage.source_bytes, 0, 1e-6);
  EXPECT_NEAR(p.throughput, 1e9 / 600e3, 1e-6);
  EXPECT_EQ(p.binding, Resource::kCopy);
}

TEST(ModelEquations, AugmentedWithoutReuseIsAMissPlusAWrite) {
  const Inputs in = base_inputs();
  Placement pl;
  pl.at(Form::augmented, Tier::ssd) = 1000;
  const Prediction p = predict(in, pl), none = predict(in, Placement{});
  EXPECT_NEAR(p.usage.cpu_s, none.usage.cpu_s, 1e-12);
  EXPECT_NEAR(p.usage.source_bytes, none.usage.source_bytes, 1e-6);
  EXPECT_NEAR(p.usage.ssd_write_bytes, 150e3, 1e-6);
  EXPECT_EQ(p.usage.ssd_read_bytes, 0);
}

// Case 4: the consumer reads decoded/, all decoded in RAM: no CPU, no source; copy 600e3 B at 1e9
// -> 1666.67/s, bound by the copy. Raw in RAM instead: cpu c_dec = 0.004 -> 1000/s.
TEST(ModelEquations, DecodedView) {
  Inputs in = base_inputs();
  in.view = Form::decoded;
  Placement pl;
  pl.at(Form::decoded, Tier::ram) = 1000;
  Prediction p = predict(in, pl);
  EXPECT_EQ(p.usage.cpu_s, 0);
  EXPECT_NEAR(p.usage.source_bytes, 0, 1e-9);
  EXPECT_NEAR(p.throughput, 1e9 / 600e3, 1e-6);
  EXPECT_EQ(p.binding, Resource::kCopy);
  Placement raw;
  raw.at(Form::raw, Tier::ram) = 1000;
  p = predict(in, raw);
  EXPECT_NEAR(p.throughput, 1000, 1e-9);
  // Augmented entries cannot serve decoded/: they change nothing.
  Placement aug;
  aug.at(Form::augmented, Tier::ram) = 1000;
  EXPECT_NEAR(predict(in, aug).throughput, predict(in, Placement{}).throughput, 1e-9);
}

// raw/ readers: 500 raw in RAM, 250 raw on SSD, 250 uncached (the solver's oracle and predict()
// share linear_load, so its raw-view coefficients are checked here by hand):
//   cpu    0 (no transform)
//   ssd    read .25*100e3 = 25e3 B at 1e9 B/s -> 40000/s
//   source .25*100e3 = 25e3 B                 -> 4000/s
//   reqs   .25                                -> 4000/s
//   copy   100e3 B                            -> 10000/s
// Throughput 4000/s, bound by the source. Pixels and variants cannot serve raw/: no change.
TEST(ModelEquations, RawView) {
  Inputs in = base_inputs();
  in.view = Form::raw;
  Placement pl;
  pl.at(Form::raw, Tier::ram) = 500;
  pl.at(Form::raw, Tier::ssd) = 250;
  const Prediction p = predict(in, pl);
  EXPECT_EQ(p.usage.cpu_s, 0);
  EXPECT_NEAR(p.usage.ssd_read_bytes, 25e3, 1e-6);
  EXPECT_NEAR(p.usage.ssd_write_bytes, 0, 1e-9);
  EXPECT_NEAR(p.usage.source_bytes, 25e3, 1e-6);
  EXPECT_NEAR(p.usage.source_requests, 0.25, 1e-12);
  EXPECT_NEAR(p.usage.copy_bytes, 100e3, 1e-6);
  EXPECT_NEAR(rate_of(p, Resource::kSsd), 40000, 1e-6);
  EXPECT_NEAR(rate_of(p, Resource::kCopy), 10000, 1e-6);
  EXPECT_NEAR(p.throughput, 4000, 1e-6);
  EXPECT_TRUE(p.binding == Resource::kSourceBytes || p.binding == Resource::kSourceRequests);  // a tie
  Placement others = pl;
  others.at(Form::decoded, Tier::ram) = 100;
  others.at(Form::augmented, Tier::ssd) = 100;
  EXPECT_NEAR(predict(in, others).throughput, p.throughput, 1e-9);
}

TEST(ModelEquations, Feasibility) {
  const Inputs in = base_inputs();
  Placement p;
  p.at(Form::decoded, Tier::ram) = 1000;  // 600 MB of 1 GB
  EXPECT_TRUE(feasible(in, p));
  p.at(Form::decoded, Tier::ram) = 1700;  // more samples than N
  EXPECT_FALSE(feasible(in, p));
  p = {};
  p.at(Form::decoded, Tier::ssd) = 800;  // 480 MB
  p.at(Form::raw, Tier::ssd) = 200;      // 20 MB
  EXPECT_TRUE(feasible(in, p));
  p.at(Form::raw, Tier::ram) = 1;  // 1001 samples: a sample would be in two places
  EXPECT_FALSE(feasible(in, p));
  p = {};
  p.at(Form::decoded, Tier::ssd) = -1;
  EXPECT_FALSE(feasible(in, p));
}

TEST(SingleForm, FillsRamThenSsd) {
  Inputs in = base_inputs();
  in.ram_capacity = 30e6;  // 300 raw, 50 decoded, 200 augmented
  in.ssd_capacity = 45e6;  // then 450 raw, 75 decoded, 300 augmented
  Placement p = single_form(in, Form::raw);
  EXPECT_EQ(p.at(Form::raw, Tier::ram), 300);
  EXPECT_EQ(p.at(Form::raw, Tier::ssd), 450);
  EXPECT_EQ(p.total(), 750);
  p = single_form(in, Form::decoded);
  EXPECT_EQ(p.at(Form::decoded, Tier::ram), 50);
  EXPECT_EQ(p.at(Form::decoded, Tier::ssd), 75);
  p = single_form(in, Form::augmented);
  EXPECT_EQ(p.at(Form::augmented, Tier::ram), 200);
  EXPECT_EQ(p.at(Form::augmented, Tier::ssd), 300);
  // Never more than N: RAM holds all 1000 raw, the SSD gets none.
  in.ram_capacity = 1e9;
  p = single_form(in, Form::raw);
  EXPECT_EQ(p.at(Form::raw, Tier::ram), 1000);
  EXPECT_EQ(p.at(Form::raw, Tier::ssd), 0);

  // The plan carries them, with their predictions. Slow source (10e6 B/s -> 100/s uncached).
  in = base_inputs();
  in.src_bandwidth = 10e6;
  const Plan plan = solve(in);
  EXPECT_STREQ(plan.alternatives[0].name, "no cache");
  EXPECT_NEAR(plan.alternatives[0].prediction.throughput, 100, 1e-9);
  // All raw: all 1000 in RAM, cpu 0.006 -> 666.67/s.
  EXPECT_NEAR(plan.alternatives[1].prediction.throughput, 4 / 0.006, 1e-6);
  // All decoded: 1000 * 600e3 = 600 MB fits RAM; cpu 0.001 -> 4000/s; copy 6666.67/s.
  EXPECT_NEAR(plan.alternatives[2].prediction.throughput, 4000, 1e-6);
  // All augmented, aug_reuse 1: every request regenerates from the source: 100/s.
  EXPECT_NEAR(plan.alternatives[3].prediction.throughput, 100, 1e-9);
}

// Hand case for the solver: everything decoded in RAM is the best possible (cpu 0.001 per request
// is the least any form costs, and it fits), so the plan is all decoded in RAM at 4000/s.
TEST(Solver, HandCaseAllDecodedInRam) {
  Inputs in = base_inputs();
  in.src_bandwidth = 10e6;
  const Plan plan = solve(in);
  EXPECT_EQ(plan.placement.at(Form::decoded, Tier::ram), 1000);
  EXPECT_EQ(plan.placement.total(), 1000);
  EXPECT_NEAR(plan.prediction.throughput, 4000, 1e-6);
  EXPECT_EQ(plan.prediction.binding, Resource::kCpu);
  EXPECT_TRUE(plan.caching_helps);
  const std::string text = explain(in, plan);
  EXPECT_NE(text.find("bound by cpu"), std::string::npos) << text;
  EXPECT_NE(text.find("all decoded"), std::string::npos) << text;
  EXPECT_NE(text.find("src_bandwidth"), std::string::npos) << text;
  // Every variant is rendered from pixels a tier keeps: the recent fills keep none of them.
  EXPECT_EQ(free_room(in, plan.placement).outside, 0);
  EXPECT_NE(text.find("no sample needs them: the tiers keep every sample in a form its view is served from"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("of the variants no tier keeps"), std::string::npos) << text;
}

// RAM for 100 decoded (60 MB), no SSD, source 10e6 B/s. Let a = decoded fraction, b = raw
// fraction in RAM with 600e3*1000 a + 100e3*1000 b <= 60e6, i.e. 6a + b <= 0.6.
// cpu load 0.001a + 0.006(1-a) over 4 cores; source load (1-a-b)*100e3 / 10e6.
// The source is binding as long as (1-a-b)/100 > (0.006 - 0.005a)/4; at the RAM limit
// b = 0.6 - 6a, the source load is (0.4 + 5a)/100, smallest at a = 0: all raw, b = 0.6:
// source 0.4 * 100e3 = 40e3 B -> 250/s; cpu 0.006 -> 666/s. So: 600 raw in RAM, 250/s.
TEST(Solver, HandCaseScarceRamPrefersRaw) {
  Inputs in = base_inputs();
  in.src_bandwidth = 10e6;
  in.ram_capacity = 60e6;
  in.ssd_capacity = 0;
  const Plan plan = solve(in);
  EXPECT_NEAR(plan.placement.at(Form::raw, Tier::ram), 600, 1e-9);
  EXPECT_NEAR(plan.prediction.throughput, 250, 1e-6);
  EXPECT_EQ(plan.prediction.binding, Resource::kSourceBytes);
  EXPECT_EQ(plan.placement.bytes(in, Tier::ssd), 0);
  // No tier keeps a variant (raw bytes in RAM render them): all of them go to the recent fills.
  EXPECT_NEAR(free_room(in, plan.placement).outside, 1, 1e-12);
  EXPECT_NE(explain(in, plan).find("of the variants no tier keeps"), std::string::npos) << explain(in, plan);
}

TEST(Solver, CachingCannotHelpConsumerBound) {
  Inputs in = base_inputs();
  in.consumer_rate = 50;  // the source alone serves 666/s (cpu bound) > 50/s
  const Plan plan = solve(in);
  EXPECT_FALSE(plan.caching_helps);
  EXPECT_EQ(plan.placement.total(), 0);
  EXPECT_NEAR(plan.prediction.throughput, 50, 1e-9);
  const std::string text = explain(in, plan);
  EXPECT_NE(text.find("cannot help"), std::string::npos) << text;
  EXPECT_NE(text.find("keeps up with the consumer"), std::string::npos) << text;
  EXPECT_NE(text.find("no SSD write"), std::string::npos) << text;
}

TEST(Solver, CachingCannotHelpCopyBound) {
  Inputs in = base_inputs();
  in.copy_bw = 15e6;  // 100/s whatever is cached
  const Plan plan = solve(in);
  EXPECT_FALSE(plan.caching_helps);
  EXPECT_EQ(plan.placement.total(), 0);
  EXPECT_EQ(plan.prediction.binding, Resource::kCopy);
  EXPECT_NE(explain(in, plan).find("binding resource is copy"), std::string::npos);
}

// Ties: with a fast source the CPU binds and raw caching saves nothing: no SSD bytes are chosen.
// Rounding to whole samples may overshoot a budget by one (a cell within 1e-6 below an integer
// rounds up); the repair takes that sample off the tier that is over. It used to take samples
// off the largest cell wherever it was, here the SSD's million, until the RAM cell was the
// largest: a plan of about 10,000 samples where 999,999 fit.
TEST(Solver, RoundingOverABudgetTakesOffTheTierThatIsOver) {
  Inputs in;
  in.view = Form::decoded;
  in.size = {1e6, 1e6, 1e6};
  in.samples = 1e6;
  in.c_dec = 1e-3;
  in.cores = 1;
  in.ram_capacity = 2.9999995 * in.slot_size(Form::decoded, Tier::ram);
  in.ssd_capacity = 1e13;
  const Plan plan = solve(in);
  EXPECT_TRUE(feasible(in, plan.placement, 0.0));
  EXPECT_GE(plan.placement.total(), 999990) << explain(in, plan);
}

TEST(Solver, TiesPreferNoSsd) {
  Inputs in = base_inputs();
  in.size[1] = 5e9;  // decoded never fits, so only raw or augmented could be cached
  in.src_bandwidth = 1e12;
  in.src_latency = 0;
  const Plan plan = solve(in);
  EXPECT_FALSE(plan.caching_helps);
  EXPECT_EQ(plan.placement.bytes(in, Tier::ssd), 0);
  EXPECT_NEAR(plan.prediction.throughput, 4 / 0.006, 1e-6);
}

namespace {

// Throughput at fractions x (index f*2+t) straight from the linear load.
double grid_throughput(const LinearLoad& ll, const std::array<double, 6>& x) {
  double worst = 0;
  for (std::size_t r = 0; r < kResources; r++) {
    if (!ll.constrained[r]) continue;
    double l = ll.base[r];
    for (std::size_t i = 0; i < 6; i++) l += ll.coef[r][i] * x[i];
    worst = std::max(worst, l);
  }
  return worst > 0 ? 1 / worst : kInf;
}

Inputs random_inputs(std::mt19937_64& rng) {
  auto uni = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto logu = [&](double lo, double hi) { return std::exp(uni(std::log(lo), std::log(hi))); };
  auto maybe_zero = [&](double v) { return uni(0, 1) < 0.1 ? 0.0 : v; };
  Inputs in;
  const double raw = logu(20e3, 500e3);
  const double dec = raw * uni(2, 12);
  in.size = {raw, dec, dec * uni(0.1, 1.0)};
  in.samples = 16.0 * std::floor(uni(100, 5000));
  const double all_dec = in.samples * dec;
  in.ram_capacity = uni(0, 0.8) * all_dec;
  in.ssd_capacity = uni(0, 1) < 0.2 ? 0.0 : uni(0, 1.5) * all_dec;
  in.src_bandwidth = maybe_zero(logu(1e6, 1e10));
  in.src_latency = maybe_zero(logu(1e-4, 0.1));
  in.src_concurrency = std::floor(uni(1, 64));
  in.ssd_read_bw = maybe_zero(logu(1e8, 7e9));
  in.ssd_write_bw = maybe_zero(logu(5e7, 5e9));
  in.c_dec = logu(1e-4, 2e-2);
  in.c_aug = logu(1e-4, 1e-2);
  in.c_aug_from_decoded = in.c_aug * uni(0.3, 1.0);
  in.cores = maybe_zero(std::floor(uni(1, 32)));
  in.copy_bw = maybe_zero(logu(1e9, 2e10));
  in.consumer_rate = uni(0, 1) < 0.15 ? logu(10, 1e5) : 0.0;
  const double reuse[] = {1, 2, 4, 8};
  in.aug_reuse = reuse[rng() % 4];
  const double v = uni(0, 1);
  in.view = v < 0.8 ? Form::augmented : v < 0.9 ? Form::decoded : Form::raw;
  return in;
}

}  // namespace

// The solver against brute force: every placement whose fractions are multiples of 1/16 (and
// that fits), on 200 random machines.
TEST(Solver, MatchesBruteForceOnRandomInstances) {
  std::mt19937_64 rng(20261122);
  constexpr int kSteps = 16;
  int helped = 0;
  for (int instance = 0; instance < 200; instance++) {
    const Inputs in = random_inputs(rng);
    const LinearLoad ll = linear_load(in);
    double best = 0;
    // Every k with sum k <= kSteps.
    for (int a = 0; a <= kSteps; a++)
      for (int b = 0; a + b <= kSteps; b++)
        for (int c = 0; a + b + c <= kSteps; c++)
          for (int d = 0; a + b + c + d <= kSteps; d++)
            for (int e = 0; a + b + c + d + e <= kSteps; e++)
              for (int f = 0; a + b + c + d + e + f <= kSteps; f++) {
                const std::array<int, 6> k{a, b, c, d, e, f};
                Placement p;
                std::array<double, 6> x{};
                for (std::size_t i = 0; i < 6; i++) {
                  x[i] = static_cast<double>(k[i]) / kSteps;
                  p.n[i / 2][i % 2] = x[i] * in.samples;
                }
                if (feasible(in, p, 0.0)) best = std::max(best, grid_throughput(ll, x));
              }

    const Plan plan = solve(in);
    SCOPED_TRACE(explain(in, plan));
    // The exact optimum is at least as good as any grid point.
    if (std::isinf(best)) {
      EXPECT_TRUE(std::isinf(plan.lp_throughput));
    } else {
      EXPECT_GE(plan.lp_throughput, best * (1 - 1e-9)) << "instance " << instance;
      // The integer plan loses at most a sample per variable to rounding.
      EXPECT_GE(plan.prediction.throughput, best * (1 - 1e-3)) << "instance " << instance;
      EXPECT_LE(plan.prediction.throughput, plan.lp_throughput * (1 + 1e-9));
    }
    // The plan fits, holds whole samples, and matches predict().
    EXPECT_TRUE(feasible(in, plan.placement, 0.0)) << "instance " << instance;
    for (const auto& row : plan.placement.n)
      for (double v : row) EXPECT_EQ(v, std::floor(v));
    const Prediction again = predict(in, plan.placement);
    EXPECT_EQ(again.throughput, plan.prediction.throughput);
    // No alternative beats the plan (beyond rounding).
    for (const Alternative& a : plan.alternatives) {
      EXPECT_TRUE(feasible(in, a.placement, 0.0));
      EXPECT_GE(plan.prediction.throughput, a.prediction.throughput * (1 - 1e-3)) << a.name;
    }
    if (plan.caching_helps) helped++;
  }
  // The random machines exercise both outcomes.
  EXPECT_GT(helped, 20);
  EXPECT_LT(helped, 200);
}

// predict() and the solver's grid evaluation agree on arbitrary placements. Both are built from
// linear_load, so this checks the step after it (adding the loads, the bottleneck); the
// coefficients themselves are checked by hand in the ModelEquations cases.
TEST(Solver, LinearLoadMatchesPredict) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100; i++) {
    const Inputs in = random_inputs(rng);
    const LinearLoad ll = linear_load(in);
    std::array<double, 6> x{};
    double left = 1;
    Placement p;
    for (std::size_t j = 0; j < 6; j++) {
      x[j] = std::uniform_real_distribution<double>(0, left)(rng);
      left -= x[j];
      p.n[j / 2][j % 2] = x[j] * in.samples;
    }
    const double want = grid_throughput(ll, x), got = predict(in, p).throughput;
    if (std::isinf(want))
      EXPECT_TRUE(std::isinf(got));
    else
      EXPECT_NEAR(got, want, want * 1e-12);
  }
}

TEST(Drift, RelativeChange) {
  EXPECT_EQ(relative_change(0, 0), 0);
  EXPECT_EQ(relative_change(100, 100), 0);
  EXPECT_NEAR(relative_change(100, 130), 0.3, 1e-12);
  EXPECT_NEAR(relative_change(100, 70), 0.3, 1e-12);
  EXPECT_EQ(relative_change(0, 5), kInf);
}

TEST(Drift, DetectsTheLargestChange) {
  const Inputs a = base_inputs();
  Inputs b = a;
  Drift d = detect_drift(a, b, 0.2);
  EXPECT_FALSE(d.drifted);
  EXPECT_EQ(d.change, 0);

  b.src_bandwidth *= 1.1;  // 10%: below the threshold
  b.c_dec *= 0.95;
  d = detect_drift(a, b, 0.2);
  EXPECT_FALSE(d.drifted);
  EXPECT_EQ(d.input, "src_bandwidth");
  EXPECT_NEAR(d.change, 0.1, 1e-12);

  // c_aug is compared as the cost of a render from the JPEG, c_dec + c_aug (0.006 s): 0.002 s
  // more is 33%.
  b.c_dec = a.c_dec;
  b.c_aug += 0.002;
  d = detect_drift(a, b, 0.2);
  EXPECT_TRUE(d.drifted);
  EXPECT_EQ(d.input, "c_dec + c_aug");
  EXPECT_NEAR(d.change, 1.0 / 3, 1e-12);

  // A c_aug that crosses zero (crop decode makes a variant from the JPEG cost about a decode) is
  // no drift while the render's cost holds: from 0 to -0.0002 s is 5% of 0.004 s.
  Inputs z = a;
  z.c_aug = 0;
  b = z;
  b.c_aug = -0.0002;
  d = detect_drift(z, b, 0.2);
  EXPECT_FALSE(d.drifted) << d.input;
  EXPECT_NEAR(d.change, 0.05, 1e-12);

  b = a;
  b.consumer_rate = 100;  // from unmeasured to measured
  d = detect_drift(a, b, 0.2);
  EXPECT_TRUE(d.drifted);
  EXPECT_EQ(d.input, "consumer_rate");

  b = a;
  b.view = Form::decoded;
  d = detect_drift(a, b, 0.2);
  EXPECT_TRUE(d.drifted);
  EXPECT_EQ(d.input, "view");
}

TEST(Ewma, FirstValueThenMovesByAlpha) {
  Ewma e(0.25);
  EXPECT_FALSE(e.has_value());
  EXPECT_EQ(e.alpha(), 0.25);
  e.update(100);
  EXPECT_TRUE(e.has_value());
  EXPECT_EQ(e.value(), 100);
  e.update(200);  // 100 + 0.25 * 100
  EXPECT_EQ(e.value(), 125);
  e.update(125);
  EXPECT_EQ(e.value(), 125);
  for (int i = 0; i < 200; i++) e.update(10);
  EXPECT_NEAR(e.value(), 10, 1e-9);
  e.reset();
  EXPECT_FALSE(e.has_value());
}
