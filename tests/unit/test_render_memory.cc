// The transform memory budget: what one render may use (store/render_memory.h), and the
// renderer taking it before it fetches the input, refusing what cannot fit, and waiting for it at
// most a bound (common/resource_budget.h).
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <thread>

#include "prepfs/common/error.h"
#include "prepfs/common/resource_budget.h"
#include "prepfs/store/render_memory.h"
#include "prepfs/store/renderer.h"
#include "prepfs/transform/pipeline_spec.h"

using namespace prepfs;
using namespace std::chrono_literals;

namespace {

SampleShapes shapes() {
  SampleShapes s;
  s.spec = transform::PipelineSpec::parse(transform::kDefaultAugmentSpec);
  return s;
}

Sample sample(uint32_t width, uint32_t height, uint64_t file_size) {
  Sample s;
  s.node = 1;
  s.path = "a.jpg";
  s.version = FileVersion{file_size, 1};
  s.dims = ImageDims{width, height};
  s.is_sample = true;
  return s;
}

}  // namespace

TEST(ResourceBudget, TakesGivesBackAndBoundsEveryWait) {
  ResourceBudget b(100);
  EXPECT_EQ(b.take(101, 0ms), ResourceBudget::Take::too_large);
  EXPECT_EQ(b.take(60, 0ms), ResourceBudget::Take::taken);
  EXPECT_EQ(b.take(50, 10ms), ResourceBudget::Take::timed_out);
  auto waiter = std::async(std::launch::async, [&] { return b.take(50, 60s); });
  std::this_thread::sleep_for(10ms);
  b.give_back(60);
  EXPECT_EQ(waiter.get(), ResourceBudget::Take::taken);
  EXPECT_EQ(b.in_use(), 50u);
  { ResourceBudget::Hold hold(&b, 50); }
  EXPECT_EQ(b.in_use(), 0u);
}

// Render ahead takes a slot only while it is free and nobody waits for one.
TEST(ResourceBudget, TakeIfIdleNeverJumpsAheadOfAWaiter) {
  ResourceBudget b(2);
  EXPECT_TRUE(b.take_if_idle(1));
  EXPECT_TRUE(b.take_if_idle(1));
  EXPECT_FALSE(b.take_if_idle(1)) << "nothing free";
  auto waiter = std::async(std::launch::async, [&] { return b.take(1, 60s); });
  while (b.waiting() == 0) std::this_thread::sleep_for(1ms);
  b.give_back(1);  // the waiter gets it...
  EXPECT_EQ(waiter.get(), ResourceBudget::Take::taken);
  EXPECT_EQ(b.waiting(), 0u);
  b.give_back(1);
  EXPECT_TRUE(b.take_if_idle(1)) << "...and with nobody waiting a free part is taken";
  b.give_back(2);
  EXPECT_EQ(b.in_use(), 0u);
}

// The prefetcher's renders ahead wait for an idle slot: woken when one comes back while no reader
// waits (never before a waiting reader), each idle taker in turn, and bounded by their wait.
TEST(ResourceBudget, TakeWhenIdleWaitsBehindReadersAndWakesWhenAPartComesBackIdle) {
  ResourceBudget b(2);
  ASSERT_EQ(b.take(2, 0ms), ResourceBudget::Take::taken);
  EXPECT_FALSE(b.take_when_idle(1, 10ms)) << "nothing comes back: the wait ends";
  auto ahead1 = std::async(std::launch::async, [&] { return b.take_when_idle(1, 60s); });
  auto ahead2 = std::async(std::launch::async, [&] { return b.take_when_idle(1, 60s); });
  auto reader = std::async(std::launch::async, [&] { return b.take(1, 60s); });
  while (b.waiting() == 0) std::this_thread::sleep_for(1ms);
  b.give_back(1);
  EXPECT_EQ(reader.get(), ResourceBudget::Take::taken) << "the reader first";
  EXPECT_EQ(ahead1.wait_for(50ms), std::future_status::timeout) << "work ahead took a reader's slot";
  EXPECT_EQ(ahead2.wait_for(0ms), std::future_status::timeout);
  b.give_back(2);  // both slots idle at once: both idle takers wake, well before their 60 s
  EXPECT_TRUE(ahead1.get());
  EXPECT_TRUE(ahead2.get());
  EXPECT_EQ(b.in_use(), 2u);
}

// cpu=auto resizes the slots while renders hold some: a shrink makes takers wait until enough
// is given back; a grow lets a waiter in at once.
TEST(ResourceBudget, ANewTotalAppliesToTheNextTakes) {
  ResourceBudget b(2);
  EXPECT_EQ(b.take(1, 0ms), ResourceBudget::Take::taken);
  EXPECT_EQ(b.take(1, 0ms), ResourceBudget::Take::taken);
  b.set_total(1);
  b.give_back(1);
  EXPECT_EQ(b.take(1, 0ms), ResourceBudget::Take::timed_out) << "1 of a total of 1 is still held";
  EXPECT_FALSE(b.take_if_idle(1));
  auto waiter = std::async(std::launch::async, [&] { return b.take(1, 60s); });
  while (b.waiting() == 0) std::this_thread::sleep_for(1ms);
  b.set_total(2);
  EXPECT_EQ(waiter.get(), ResourceBudget::Take::taken);
  EXPECT_EQ(b.in_use(), 2u);
  EXPECT_EQ(b.total(), 2u);
}

TEST(RenderMemory, CountsInputPixelsOutputAndLibjpeg) {
  const SampleShapes s = shapes();
  const ImageDims photo{4000, 3000};
  const uint64_t big_budget = 1ull << 40;
  RenderMemory d = render_memory(s, photo, 5'000'000, RenderPath::decode, big_budget);
  EXPECT_EQ(d.input, 5'000'000u);
  EXPECT_EQ(d.output, s.decoded_size(photo));  // decoded straight into the output
  EXPECT_EQ(d.pixels, 0u);
  EXPECT_EQ(d.libjpeg_coefficients, 4u * (500 + 4) * (375 + 4) * 128);  // four full-resolution components
  // The coefficients' share shrinks to what the budget leaves; the rest is what it is.
  const uint64_t tight = d.total() - d.libjpeg_coefficients + 1000;
  RenderMemory capped = render_memory(s, photo, 5'000'000, RenderPath::decode, tight);
  EXPECT_EQ(capped.libjpeg_coefficients, 1000u);
  EXPECT_EQ(capped.total(), tight);
  // Augmenting holds the decoded image, the crop's resampling and the output.
  RenderMemory a = render_memory(s, photo, 5'000'000, RenderPath::augment_from_jpeg, big_budget);
  EXPECT_EQ(a.pixels, 3u * (4000 * 3000 + 224 * 3000 + 224 * 224));
  EXPECT_EQ(a.output, s.augmented_size(photo));
  RenderMemory p = render_memory(s, photo, 5'000'000, RenderPath::augment_from_pixels, big_budget);
  EXPECT_EQ(p.input + p.libjpeg(), 0u);
  EXPECT_EQ(p.pixels, a.pixels);
}

TEST(Renderer, RefusesAnInputOverMaxInputBeforeFetchingIt) {
  RenderCounters counters;
  RenderConfig rc;
  rc.shapes = shapes();
  rc.max_input = 1 << 20;
  Renderer r(rc, counters);
  bool fetched = false;
  auto fetch = [&] {
    fetched = true;
    return JpegBytes{};
  };
  try {
    r.decoded(sample(16, 16, 3ull << 30), fetch);
    FAIL() << "a 3 GiB input was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EIO);
    EXPECT_NE(std::string(e.what()).find("max_input"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fetched);
}

TEST(Renderer, RefusesARenderThatCannotFitTheBudgetBeforeFetching) {
  RenderCounters counters;
  RenderConfig rc;
  rc.shapes = shapes();
  rc.transform_mem = 64 << 20;
  Renderer r(rc, counters);
  bool fetched = false;
  try {
    r.decoded(sample(8000, 8000, 1000), [&] {  // 192 MB of output alone
      fetched = true;
      return JpegBytes{};
    });
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EIO);
    EXPECT_NE(std::string(e.what()).find("transform_mem"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fetched);
}

// While one render holds the memory, another that needs it waits at most `wait`, then fails with
// ETIMEDOUT without having fetched anything.
TEST(Renderer, WaitsForTransformMemoryAtMostItsBound) {
  RenderCounters counters;
  RenderConfig rc;
  rc.shapes = shapes();
  rc.transform_mem = 20 << 20;  // one 1000 x 1000 decode at a time (13 MB: 3 MB of pixels, 10 of libjpeg)
  rc.wait = 50ms;
  rc.cpu = 4;
  Renderer r(rc, counters);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> holding{false};
  auto first = std::async(std::launch::async, [&] {
    try {
      r.decoded(sample(1000, 1000, 1000), [&] {
        holding = true;
        gate.wait();
        return JpegBytes{};  // not a JPEG: EIO, which is not what this test is about
      });
    } catch (const Error&) {
    }
  });
  while (!holding) std::this_thread::sleep_for(1ms);
  EXPECT_GT(r.transform_mem_in_use(), 10u << 20);
  bool fetched = false;
  try {
    r.decoded(sample(1000, 1000, 1000), [&] {
      fetched = true;
      return JpegBytes{};
    });
    ADD_FAILURE() << "no wait for memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), ETIMEDOUT) << e.what();
  }
  EXPECT_FALSE(fetched);
  EXPECT_EQ(load(counters.timeouts), 1u);
  release.set_value();
  first.get();
  EXPECT_EQ(r.transform_mem_in_use(), 0u);
}

// Work ahead holds its cpu slot before it takes memory; a reader takes memory before its slot.
// With one slot, work ahead that waited for the memory a reader holds kept the slot that reader
// then waited for: both stalled until the wait ended, and one failed with ETIMEDOUT. Work ahead
// now gives way at once (EBUSY) and the reader goes on.
TEST(Renderer, WorkAheadGivesWayToAReaderHoldingTheMemory) {
  RenderCounters counters;
  RenderConfig rc;
  rc.shapes = shapes();
  rc.transform_mem = 20 << 20;  // one 1000 x 1000 decode at a time
  rc.wait = 3s;
  rc.cpu = 1;
  Renderer r(rc, counters);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> holding{false};
  auto reader = std::async(std::launch::async, [&] {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      r.decoded(sample(1000, 1000, 1000), [&] {
        holding = true;
        gate.wait();
        return JpegBytes{};  // not a JPEG: EIO after its slot, which is not what this test is about
      });
    } catch (const Error& e) {
      EXPECT_NE(e.err(), ETIMEDOUT) << e.what();
    }
    return std::chrono::steady_clock::now() - t0;
  });
  while (!holding) std::this_thread::sleep_for(1ms);
  ResourceBudget::Hold slot = r.idle_slot();  // work ahead: the only slot, while the reader fetches
  ASSERT_EQ(slot.amount(), 1u);
  auto ahead = std::async(std::launch::async, [&] {
    try {
      r.decoded(sample(1000, 1000, 1000), [] { return JpegBytes{}; }, SlotUse::held);
      return 0;
    } catch (const Error& e) {
      return e.err();
    }
  });
  EXPECT_EQ(ahead.get(), EBUSY);  // at once, not after the wait
  slot = {};
  release.set_value();
  EXPECT_LT(reader.get(), 2s);
  EXPECT_EQ(load(counters.timeouts), 0u);
}
