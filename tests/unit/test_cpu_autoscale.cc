// cpu=auto: the controller as a pure function of scripted windows, the autoscaler over counters and
// CPU times a test drives, and the /proc/stat parsing under both.
#include <gtest/gtest.h>

#include <vector>

#include "prepfs/common/cpu_times.h"
#include "prepfs/partition/cpu_autoscaler.h"
#include "prepfs/partition/cpu_controller.h"

namespace prepfs {
namespace {

CpuControllerConfig on(unsigned cores) {
  CpuControllerConfig c;
  c.max_slots = cores;
  return c;
}

CpuWindow stalled(double stall, double idle, double busy = 1) { return CpuWindow{1, stall, busy, idle}; }
CpuWindow calm(double busy, double idle = 1) { return CpuWindow{1, 0, busy, idle}; }

std::vector<unsigned> run(CpuController c, const std::vector<CpuWindow>& trace) {
  std::vector<unsigned> slots;
  for (const CpuWindow& w : trace) slots.push_back(c.step(w).slots);
  return slots;
}

TEST(CpuController, GrowsWhileReadersStallAndCoresAreIdleButNeverBeyondTheCores) {
  CpuController c(on(4), 1);
  for (int i = 0; i < 50; i++) {
    const CpuDecision d = c.step(stalled(2.0, 3.5, 4));
    EXPECT_LE(d.slots, 4u);
    EXPECT_GE(d.slots, 1u);
  }
  EXPECT_EQ(c.slots(), 4u);
  const CpuDecision d = c.step(stalled(2.0, 3.5, 4));
  EXPECT_EQ(d.change, 0);
  EXPECT_NE(d.why.find("machine's 4 cores"), std::string::npos) << d.why;
  // A start above the cores is brought within them.
  EXPECT_EQ(CpuController(on(2), 9).slots(), 2u);
  EXPECT_EQ(CpuController(on(0), 0).slots(), 1u) << "at least one slot, whatever the machine says";
}

TEST(CpuController, DoesNotGrowWithoutIdleCpu) {
  CpuController c(on(4), 1);
  const CpuDecision d = c.step(stalled(1.0, 0.1));
  EXPECT_EQ(d.slots, 1u);
  EXPECT_EQ(d.change, 0);
  EXPECT_NE(d.why.find("no idle core"), std::string::npos) << d.why;
}

TEST(CpuController, ShrinksWhenReadersStopWaiting) {
  CpuController c(on(4), 4);
  std::vector<unsigned> seen;
  for (int i = 0; i < 20; i++) seen.push_back(c.step(calm(0.2)).slots);
  EXPECT_EQ(c.slots(), 1u);
  // One step down after every calm_ticks (3) calm windows, never below one.
  EXPECT_EQ(seen, (std::vector<unsigned>{4, 4, 3, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
}

TEST(CpuController, KeepsSlotsTheReadersStillUse) {
  // No waiting, but 1.5 of 2 slots busy: one slot fewer would make readers wait again.
  CpuController c(on(2), 2);
  for (int i = 0; i < 10; i++) EXPECT_EQ(c.step(calm(1.5)).slots, 2u);
  // A wait now and then restarts the calm count.
  CpuController d(on(2), 2);
  d.step(calm(0.1));
  d.step(calm(0.1));
  d.step(stalled(0.02, 1, 0.1));  // between shrink_stall and grow_stall: hold, not calm
  EXPECT_EQ(d.step(calm(0.1)).slots, 2u);
  EXPECT_EQ(d.step(calm(0.1)).slots, 2u);
  EXPECT_EQ(d.step(calm(0.1)).slots, 1u);
}

TEST(CpuController, IsDeterministicUnderAScriptedStallTrace) {
  // An epoch that stalls, a burst of competing work that takes the idle CPU, then a reader that
  // stops: the same decisions every time, and these ones.
  std::vector<CpuWindow> trace;
  for (int i = 0; i < 3; i++) trace.push_back(stalled(0.4, 1.2, 1));  // grows 1 -> 2 -> 3 -> 3 (max 3)
  for (int i = 0; i < 2; i++) trace.push_back(stalled(0.4, 0.1, 3));  // stalls, no idle CPU: holds
  for (int i = 0; i < 7; i++) trace.push_back(calm(0.3));             // readers gone: shrinks
  const std::vector<unsigned> expected = {2, 3, 3, 3, 3, 3, 3, 2, 2, 2, 1, 1};
  EXPECT_EQ(run(CpuController(on(3), 1), trace), expected);
  EXPECT_EQ(run(CpuController(on(3), 1), trace), expected);
  // The reasons are part of the decision and just as repeatable.
  CpuController a(on(3), 1), b(on(3), 1);
  for (const CpuWindow& w : trace) EXPECT_EQ(a.step(w).why, b.step(w).why);
}

TEST(CpuTimes, ParsesTheFirstLineOfProcStat) {
  const auto t = parse_cpu_times("cpu  100 5 50 800 20 1 2 3 0 0\ncpu0 1 2 3 4\n");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->idle, 820u);
  EXPECT_EQ(t->total, 981u);
  EXPECT_FALSE(parse_cpu_times("intr 1 2 3"));
  EXPECT_FALSE(parse_cpu_times("cpu  1 2"));
  EXPECT_DOUBLE_EQ(idle_cores(CpuTimes{100, 1000}, CpuTimes{400, 1400}, 2), 1.5);
  EXPECT_EQ(idle_cores(CpuTimes{100, 1000}, CpuTimes{100, 1000}, 2), 0) << "no time passed";
  EXPECT_TRUE(read_cpu_times());  // this machine's
  EXPECT_GE(usable_cores(), 1u);
}

// The running part: stall and busy time from the renderer's counters, idle CPU from /proc/stat
// (scripted here), decisions applied to the renderer and shown in .prepfs/plan.
TEST(CpuAutoscaler, AppliesTheControllersDecisionsFromTheCounters) {
  RenderCounters renders;
  CpuTimes cpu{0, 0};
  std::vector<unsigned> applied;
  CpuAutoscalerConfig cfg;
  cfg.automatic = true;
  cfg.cores = 2;
  cfg.online_cpus = 2;
  CpuAutoscaler scaler(
      cfg, renders, [&](unsigned n) { applied.push_back(n); }, [&] { return cpu; });
  EXPECT_EQ(applied, std::vector<unsigned>{1}) << "starts from one slot";
  auto window = [&](uint64_t wait_ms, uint64_t busy_ms, uint64_t idle_jiffies) {
    bump(renders.cpu_wait_ns, wait_ms * 1'000'000);
    bump(renders.slot_busy_ns, busy_ms * 1'000'000);
    cpu.idle += idle_jiffies;
    cpu.total += 200;  // 2 CPUs, 100 jiffies a second each
    scaler.tick_window(std::chrono::seconds(1));
  };
  window(300, 1000, 100);  // readers waited 0.3 s, one core idle
  EXPECT_EQ(applied, (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(scaler.slots(), 2u);
  window(300, 2000, 100);  // still waiting, but at the machine's 2 cores
  EXPECT_EQ(scaler.slots(), 2u);
  for (int i = 0; i < 3; i++) window(0, 100, 190);  // nobody waits, slots mostly idle
  EXPECT_EQ(applied, (std::vector<unsigned>{1, 2, 1}));
  const std::string text = scaler.report_text();
  EXPECT_NE(text.find("cpu=auto, 1 slot(s) of the machine's 2 core(s); 1 grow(s), 1 shrink(s)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("shrank to 1"), std::string::npos) << text;
  const std::string json = scaler.report_json();
  EXPECT_NE(json.find("\"mode\": \"auto\", \"slots\": 1, \"cores\": 2"), std::string::npos) << json;
}

TEST(CpuAutoscaler, AFixedCountIsOnlyMeasured) {
  RenderCounters renders;
  bool applied = false;
  CpuAutoscalerConfig cfg;
  cfg.fixed_slots = 3;
  cfg.cores = 8;
  CpuAutoscaler scaler(
      cfg, renders, [&](unsigned) { applied = true; }, [] { return CpuTimes{}; });
  bump(renders.cpu_wait_ns, 500'000'000);
  scaler.tick_window(std::chrono::seconds(1));
  EXPECT_FALSE(applied);
  EXPECT_EQ(scaler.slots(), 3u);
  EXPECT_NE(scaler.report_text().find("cpu=3 (fixed"), std::string::npos);
  EXPECT_NE(scaler.report_text().find("waited 0.500 s/s"), std::string::npos) << scaler.report_text();
}

}  // namespace
}  // namespace prepfs
