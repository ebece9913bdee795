// The job's knowledge in the cache: published orders (JobKnowledge), Belady against an offline
// MIN oracle, LFU and importance ranking, and the prefetcher's bounds through a whole Daemon.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>

#include "prepfs/cache/policy.h"
#include "prepfs/cache/tier_index.h"
#include "prepfs/common/error.h"
#include "prepfs/core/image_names.h"
#include "prepfs/core/job_files.h"
#include "prepfs/core/view_paths.h"
#include "prepfs/daemon/daemon.h"
#include "prepfs/index/sample_list.h"
#include "prepfs/partition/job_knowledge.h"
#include "prepfs/source/posix_source.h"
#include "temp_dir.h"

namespace prepfs {
namespace {

CacheKey key_of(uint32_t sample) { return CacheKey{sample + 1ull, sample * 31ull + 7}; }

// Offline Belady MIN with bypass on unit-size entries: on a miss with a full cache, the entry
// read again farthest in the future (the newcomer included) is the one not kept.
size_t min_hits(const std::vector<uint32_t>& trace, size_t capacity) {
  std::set<uint32_t> cache;
  size_t hits = 0;
  auto next_use = [&](size_t from, uint32_t x) {
    for (size_t i = from; i < trace.size(); i++)
      if (trace[i] == x) return i;
    return trace.size() + x;  // never again: farther than anything, distinct per sample
  };
  for (size_t t = 0; t < trace.size(); t++) {
    const uint32_t x = trace[t];
    if (cache.count(x)) {
      hits++;
      continue;
    }
    if (cache.size() < capacity) {
      cache.insert(x);
      continue;
    }
    uint32_t farthest = x;
    size_t far = next_use(t + 1, x);
    for (uint32_t y : cache)
      if (size_t n = next_use(t + 1, y); n > far) far = n, farthest = y;
    if (farthest != x) {
      cache.erase(farthest);
      cache.insert(x);
    }
  }
  return hits;
}

// The same trace through a TierIndex with the belady policy, published as one job's order and
// consumed as the store does: the read is noted, then the entry looked up or admitted.
size_t belady_hits(const std::vector<uint32_t>& trace, size_t capacity, uint32_t samples) {
  JobKnowledge k(samples);
  std::vector<Access> order;
  for (uint32_t x : trace) order.push_back(Access{x, Form::raw});
  k.publish("job", order);
  TierIndex idx(capacity, make_policy("belady", 1, &k));
  size_t hits = 0;
  std::vector<CacheKey> evicted;
  for (uint32_t x : trace) {
    EXPECT_TRUE(k.note_access(x));
    idx.sample_changed(x);
    if (idx.touch(key_of(x))) {
      hits++;
      continue;
    }
    idx.admit(key_of(x), 1, Form::raw, &evicted, x);
  }
  return hits;
}

TEST(Belady, EqualsTheOfflineMinOracleOnRandomTraces) {
  std::mt19937 rng(5);
  for (int round = 0; round < 60; round++) {
    const uint32_t samples = 4 + rng() % 30;
    const size_t capacity = 1 + rng() % samples;
    std::vector<uint32_t> trace;
    const bool epochs = round % 2 == 0;  // shuffled epochs (the training pattern), or any sequence
    for (int e = 0; e < 4; e++) {
      std::vector<uint32_t> perm(samples);
      for (uint32_t i = 0; i < samples; i++) perm[i] = epochs ? i : rng() % samples;
      if (epochs) std::shuffle(perm.begin(), perm.end(), rng);
      trace.insert(trace.end(), perm.begin(), perm.end());
    }
    ASSERT_EQ(belady_hits(trace, capacity, samples), min_hits(trace, capacity))
        << "round " << round << ": " << samples << " samples, capacity " << capacity;
  }
}

TEST(Belady, WithoutAnOrderItIsLru) {
  JobKnowledge k(10);
  BeladyPolicy p(&k);
  LruPolicy lru;
  for (uint32_t i = 0; i < 5; i++) p.on_insert(key_of(i), i), lru.on_insert(key_of(i), i);
  p.on_access(key_of(0)), lru.on_access(key_of(0));
  p.on_access(key_of(3)), lru.on_access(key_of(3));
  for (int i = 0; i < 5; i++) {
    ASSERT_EQ(*p.victim(), *lru.victim());
    p.on_erase(*lru.victim());
    lru.on_erase(*lru.victim());
  }
}

TEST(Lfu, EvictsTheLeastUsedThenTheLeastRecent) {
  LfuPolicy p;
  for (uint32_t i = 0; i < 4; i++) p.on_insert(key_of(i));
  p.on_access(key_of(0));
  p.on_access(key_of(0));
  p.on_access(key_of(1));
  p.on_access(key_of(3));
  // uses: 0 -> 3, 1 -> 2, 2 -> 1, 3 -> 2 (3 used after 1)
  EXPECT_EQ(*p.victim(), key_of(2));
  p.on_erase(key_of(2));
  EXPECT_EQ(*p.victim(), key_of(1));
  p.on_erase(key_of(1));
  EXPECT_EQ(*p.victim(), key_of(3));
  p.on_erase(key_of(3));
  EXPECT_EQ(*p.victim(), key_of(0));
  p.on_erase(key_of(0));
  EXPECT_FALSE(p.victim());
}

TEST(Importance, TheLeastImportantGoesFirstAndUnseenRanksHighest) {
  JobKnowledge k(10);
  ImportancePolicy p(&k);
  for (uint32_t i = 0; i < 4; i++) k.set_importance(i, 1.0 + i);  // 0 least important
  k.bump_generation();
  for (uint32_t i = 0; i < 5; i++) p.on_insert(key_of(i), i);  // 4 was never reported
  EXPECT_EQ(*p.victim(), key_of(0));
  EXPECT_TRUE(p.keeps_over(key_of(1), 0)) << "a less important newcomer must not push out a more important entry";
  EXPECT_FALSE(p.keeps_over(key_of(0), 4)) << "an unseen sample ranks above every reported one";
  // The importance file changes the order: 3 becomes the least important.
  k.set_importance(3, 0.5);
  k.bump_generation();
  EXPECT_EQ(*p.victim(), key_of(3));
}

TEST(Importance, AGhostHitBoostsASampleThatWasPushedOutTooEarly) {
  JobKnowledge k(10);
  ImportancePolicy p(&k);
  k.set_importance(1, 1.0);
  k.set_importance(2, 1.5);
  k.bump_generation();
  p.on_insert(key_of(1), 1);
  p.on_insert(key_of(2), 2);
  EXPECT_EQ(*p.victim(), key_of(1));
  p.on_erase(key_of(1));      // evicted: a ghost now
  p.on_insert(key_of(1), 1);  // asked for again: boosted x2 (2.0 > 1.5)
  EXPECT_EQ(*p.victim(), key_of(2));
}

TEST(JobKnowledge, ReadsConsumeTheClosestJobsAccessAndCursorsAdvance) {
  JobKnowledge k(8);
  k.publish("a", {{1, Form::raw}, {2, Form::raw}, {3, Form::raw}, {1, Form::raw}});
  k.publish("b", {{3, Form::decoded}, {4, Form::decoded}});
  EXPECT_TRUE(k.has_future());
  // Sample 3: job b reads it next (0 ahead), job a only after 2 more.
  EXPECT_EQ(k.next_use(3), 0u);
  EXPECT_TRUE(k.note_access(3));
  std::map<std::string, JobStatus> st;
  for (const JobStatus& j : k.jobs()) st[j.name] = j;
  EXPECT_EQ(st["b"].consumed, 1u);
  EXPECT_EQ(st["a"].consumed, 0u);
  EXPECT_FALSE(k.note_access(7)) << "a read nobody published";
  EXPECT_EQ(k.unexpected_reads(), 1u);
  auto up = k.upcoming({}, 10);
  ASSERT_EQ(up.size(), 2u);
  EXPECT_EQ(up[0].name, "a");
  EXPECT_EQ(up[0].ahead.size(), 4u);
  EXPECT_EQ(up[1].ahead.size(), 1u);
  EXPECT_EQ(up[1].ahead[0].access.node, 4u);
  EXPECT_EQ(up[1].ahead[0].access.form, Form::decoded);
  k.reset("a");
  EXPECT_EQ(k.next_use(1), SampleKnowledge::kNever);
  k.end("b");
  EXPECT_FALSE(k.has_future());
  EXPECT_EQ(k.next_use(4), SampleKnowledge::kNever);
}

// The prefetcher remembers, per job name, the position it has looked at (its frontier), and
// looks only past it. Positions must never come back, or the new accesses under them are never
// prefetched: a reset (the sampler's at every epoch) used to move the cursor back to where the
// dropped prefix began, and a job ended and published again under its name started at 0.
TEST(JobKnowledge, PositionsNeverComeBackAcrossAResetOrAJobOfTheSameName) {
  JobKnowledge k(8);
  auto walked = [&] {  // the prefetcher's frontier after one round: past everything it saw
    std::map<std::string, uint64_t> from;
    for (const JobAhead& j : k.upcoming({}, 100))
      if (!j.ahead.empty()) from[j.name] = j.ahead.back().pos + 1;
    return from;
  };
  k.publish("a", {{1, Form::raw}, {2, Form::raw}, {3, Form::raw}});
  std::map<std::string, uint64_t> from = walked();
  EXPECT_TRUE(k.note_access(1));
  k.reset("a");  // the next epoch
  k.publish("a", {{4, Form::raw}, {5, Form::raw}});
  std::vector<JobAhead> up = k.upcoming(from, 100);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].ahead.size(), 2u) << "the next epoch's accesses sit under the frontier of the last";
  from = walked();
  k.end("a");
  k.publish("a", {{6, Form::raw}, {7, Form::raw}, {1, Form::raw}});
  up = k.upcoming(from, 100);
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].ahead.size(), 3u) << "a new job of the same name starts under the old one's frontier";
  EXPECT_EQ(k.jobs().at(0).published, 3u);  // counted from the job's own start
  EXPECT_GE(up[0].cursor, from["a"]);
}

// Each job costs 16 bytes per node: a writer naming ever new jobs (or runs that die without
// `end`) used to grow the daemon without bound. Beyond kMaxJobs the idlest job is forgotten.
TEST(JobKnowledge, ANewJobBeyondTheMostForgetsTheIdlest) {
  JobKnowledge k(100);
  const size_t most = JobKnowledge::kMaxJobs;
  for (uint32_t i = 0; i < most; i++) k.publish("j" + std::to_string(i), {{i, Form::raw}});
  for (uint32_t i = 0; i < most; i++) {
    if (i == 3) continue;  // every job but j3 reads
    EXPECT_TRUE(k.note_access(i));
  }
  k.publish("new", {{50, Form::raw}});
  std::vector<std::string> names;
  for (const JobStatus& j : k.jobs()) names.push_back(j.name);
  EXPECT_EQ(names.size(), most);
  EXPECT_EQ(std::count(names.begin(), names.end(), "j3"), 0) << "the idlest job is kept";
  EXPECT_EQ(std::count(names.begin(), names.end(), "new"), 1);
  EXPECT_EQ(k.next_use(3), SampleKnowledge::kNever);  // its future went with it
  for (int i = 0; i < 100; i++) k.set_opportunistic("more" + std::to_string(i), false);
  EXPECT_EQ(k.jobs().size(), most);
}

std::set<std::string> job_names(const JobKnowledge& k) {
  std::set<std::string> names;
  for (const JobStatus& j : k.jobs()) names.insert(j.name);
  return names;
}

// With the jobs full, a user who names ever new jobs pushed out other users' jobs, the idlest
// first, however few those users had. Now the job forgotten is the idlest of whoever holds the
// most jobs, the new one counted.
TEST(JobKnowledge, AUserWithManyJobsPushesOutTheirOwn) {
  JobKnowledge k(100);
  const size_t most = JobKnowledge::kMaxJobs;
  EXPECT_EQ(job_owner("t@23456"), "@23456");
  EXPECT_EQ(job_owner("t"), "");
  k.publish("mine", {{0, Form::raw}});  // the daemon's own user's: idlest of all from here on
  k.publish("b@2", {{1, Form::raw}});
  for (uint32_t i = 2; i < most; i++) {
    k.publish("a" + std::to_string(i) + "@1", {{i, Form::raw}});
    EXPECT_TRUE(k.note_access(i));
  }
  EXPECT_EQ(k.jobs().size(), most);
  for (uint32_t i = 0; i < 40; i++) k.publish("more" + std::to_string(i) + "@1", {{50 + i, Form::raw}});
  std::set<std::string> names = job_names(k);
  EXPECT_EQ(names.size(), most);
  EXPECT_EQ(names.count("mine"), 1u) << "another user's many jobs pushed out the daemon user's one";
  EXPECT_EQ(names.count("b@2"), 1u) << "another user's many jobs pushed out this user's one";
  EXPECT_EQ(names.count("more39@1"), 1u);
  // A third user's new job takes the place of one of theirs too.
  k.publish("c@3", {{90, Form::raw}});
  names = job_names(k);
  EXPECT_EQ(names.size(), most);
  EXPECT_EQ(names.count("c@3") + names.count("mine") + names.count("b@2"), 3u);
}

// A source of two files, x and y, with its views' paths and the jobs' knowledge: what an order
// session writes to.
Tree scan_x_and_y(test::TempDir& d) {
  d.write("src/x", "x");
  d.write("src/y", "y");
  PosixSource src(d / "src");
  return Tree::scan(src);
}
struct OrderRig {
  test::TempDir dir;
  Tree tree = scan_x_and_y(dir);
  ImageNames names{tree, ".ppm"};
  ViewPaths paths{tree, names};
  JobKnowledge knowledge{tree.size()};
  // What the job has published so far (0 for a job the daemon does not know).
  uint64_t published(const std::string& job) const {
    for (const JobStatus& j : knowledge.jobs())
      if (j.name == job) return j.published;
    return 0;
  }
};

// A write to `order` with a bad line used to leave its lines in the handle's buffer: the next
// write parsed them again (the lines before the bad one published twice, the bad one failing
// again), and the buffer grew with every write. A failed write now ends the handle. And it
// applies nothing: the lines before the bad one were published in part (up to the last `job`
// line, or batch of 65,536 paths, before it), so a writer that saw EINVAL could not know what
// took effect, and writing it again published that part twice.
TEST(JobFiles, AFailedOrderWriteAppliesNothingAndEndsItsHandle) {
  OrderRig rig;
  JobKnowledge& k = rig.knowledge;
  const ViewPaths& paths = rig.paths;
  auto published = [&](const std::string& job) { return rig.published(job); };
  auto order = open_order_session(k, paths, nullptr);
  order->write("job a\nraw/x\n");
  ASSERT_EQ(published("a"), 1u);
  EXPECT_THROW(order->write("raw/y\njob b\nraw/x\njob b what\n"), Error);  // its last line is bad
  EXPECT_EQ(published("a"), 1u) << "the failed write published what came before its bad line";
  EXPECT_EQ(published("b"), 0u);
  std::string many = "job c\n";
  for (int i = 0; i < 100'000; i++) many += "raw/x\n";  // more than one batch
  EXPECT_THROW(open_order_session(k, paths, nullptr)->write(many + "job c what\n"), Error);
  EXPECT_EQ(published("c"), 0u) << "a batch of the failed write was published";
  try {
    order->write("raw/y\n");
    ADD_FAILURE() << "a write after a failed one was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EINVAL);
  }
  order->close();
  EXPECT_EQ(published("a"), 1u) << "the failed write's lines were parsed again";
  EXPECT_EQ(k.jobs().size(), 1u);  // a

  // A line that never ends: refused once over 64 KiB, and nothing more is buffered after that.
  auto endless = open_order_session(k, paths, nullptr);
  const std::string piece(4 << 10, 'r');
  int taken = 0;
  try {
    for (; taken < 64; taken++) endless->write(piece);
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EINVAL);
  }
  EXPECT_EQ(taken, 16);  // the 17th piece passes 64 KiB
  EXPECT_THROW(endless->write("job c\nraw/x\n"), Error);
  endless->close();
  EXPECT_EQ(k.jobs().size(), 1u);
}

// Two users' jobs were one when they had the same name: both users' unnamed orders went to
// "default", and either's `reset` or `end` dropped the other's. Each user's names are now their
// own; the daemon's own user's keep their plain names.
TEST(JobFiles, EachUsersJobNamesAreTheirOwn) {
  OrderRig rig;
  JobKnowledge& k = rig.knowledge;
  const ViewPaths& paths = rig.paths;
  auto published = [&](const std::string& job) { return rig.published(job); };
  EXPECT_EQ(job_owner_suffix(0, 0), "");
  EXPECT_EQ(job_owner_suffix(23456, 0), "@23456");
  EXPECT_EQ(job_owner_suffix(1000, 1000), "");
  auto own = open_order_session(k, paths, nullptr, job_owner_suffix(0, 0));
  auto alice = open_order_session(k, paths, nullptr, job_owner_suffix(23456, 0));
  auto bob = open_order_session(k, paths, nullptr, job_owner_suffix(23457, 0));
  own->write("raw/x\n");
  alice->write("raw/x\nraw/y\njob t\nraw/y\n");
  bob->write("raw/y\njob t\nreset\nend\n");
  EXPECT_EQ(published("default"), 1u);
  EXPECT_EQ(published("default@23456"), 2u) << "another user's unnamed order joined this one";
  EXPECT_EQ(published("default@23457"), 1u);
  EXPECT_EQ(published("t@23456"), 1u) << "another user's reset or end of t dropped it";
  // A name with '@' is no job name: nobody writes as another user.
  EXPECT_THROW(bob->write("job t@23456\n"), Error);
  EXPECT_EQ(k.jobs().size(), 4u);
}

// An importance is kept as a float: a value past FLT_MAX (1e300) did not convert (undefined
// behaviour, +inf on x86). It is refused as a value out of range, and the sample keeps its own.
TEST(JobFiles, AnImportanceAFloatCannotHoldIsRefused) {
  OrderRig rig;
  const ViewPaths& paths = rig.paths;
  JobKnowledge& k = rig.knowledge;
  SampleList samples(rig.tree, SampleShapes{});
  const uint32_t a = *rig.tree.lookup(Tree::kRoot, "x");
  auto session = open_importance_session(k, samples, paths);
  session->write("raw/x 2.5\n");
  EXPECT_EQ(k.importance(a), 2.5);
  for (const char* bad : {"raw/x 1e300\n", "raw/x 3.5e38\n", "raw/x inf\n", "raw/x -1\n"}) {
    auto s2 = open_importance_session(k, samples, paths);
    try {
      s2->write(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.err(), EINVAL) << bad;
    }
  }
  EXPECT_EQ(k.importance(a), 2.5);
  // A write with a bad line applies none of its lines.
  EXPECT_THROW(open_importance_session(k, samples, paths)->write("raw/x 7\nraw/y 1e300\n"), Error);
  EXPECT_EQ(k.importance(a), 2.5);
  session->write("raw/x 3.4e38\n");  // FLT_MAX is 3.40282e38
  EXPECT_EQ(k.importance(a), double(3.4e38f));
}

// A lazy mount has read few headers when a job publishes its order (64 at mount), and a name in
// decoded/ or augmented/ needs the file's header to resolve: every other line naming those views
// was skipped as naming nothing, so nothing was prefetched for it and belady saw no future. A file
// whose header is unread is taken at its word; one known to be no image still names nothing.
TEST(JobFiles, AnOrderNamesImageViewFilesWhoseHeadersAreNotReadYet) {
  test::TempDir d;
  d.write("src/cls/a.jpg", "not read yet");
  d.write("src/cls/b.JPEG", "not read yet");
  d.write("src/cls/c.jpg", "known: no image");
  PosixSource src(d / "src");
  Tree tree = Tree::scan(src);
  tree.set_all_dims(std::vector<ImageDims>(tree.size(), ImageDims::unprobed()));  // a lazy first mount
  const uint32_t c = *tree.lookup(*tree.lookup(Tree::kRoot, "cls"), "c.jpg");
  tree.set_dims(c, tree.version(c), ImageDims{});
  ImageNames names(tree, "ppm");
  ViewPaths paths(tree, names);
  JobKnowledge k(tree.size());
  auto order = open_order_session(k, paths, nullptr);
  order->write("job t\ndecoded/cls/a.ppm\naugmented/cls/b.ppm\ndecoded/cls/c.ppm\n");
  order->close();
  ASSERT_EQ(k.jobs().size(), 1u);
  EXPECT_EQ(k.jobs()[0].published, 2u);
}

// A job's pending count, as stats and metrics show it, through reads, a reset and a new epoch
// (kept as it changes now: it was counted by a walk of every pending access per render).
TEST(JobKnowledge, PendingFollowsReadsResetsAndEpochs) {
  JobKnowledge k(10);
  std::vector<Access> epoch;
  for (uint32_t n = 0; n < 10; n++) epoch.push_back(Access{n, Form::raw});
  k.publish("a", epoch);
  EXPECT_EQ(k.jobs()[0].pending, 10u);
  for (uint32_t n : {3u, 0u, 7u}) EXPECT_TRUE(k.note_access(n));  // out of order, as workers read
  EXPECT_EQ(k.jobs()[0].pending, 7u);
  EXPECT_EQ(k.jobs()[0].consumed, 3u);
  k.publish("a", epoch);  // the next epoch appended
  EXPECT_EQ(k.jobs()[0].pending, 17u);
  EXPECT_TRUE(k.note_access(3));  // the first epoch's pending access of node 3 is gone: the second's
  EXPECT_EQ(k.jobs()[0].pending, 16u);
  k.reset("a");
  EXPECT_EQ(k.jobs()[0].pending, 0u);
  EXPECT_FALSE(k.note_access(1)) << "a reset job still expected a read";
  k.publish("a", {Access{1, Form::raw}, Access{2, Form::raw}});
  EXPECT_EQ(k.jobs()[0].pending, 2u);
  EXPECT_EQ(k.jobs()[0].published, 22u);
}

// Nothing bounded what a writer of .prepfs/order made the daemon hold (17 bytes per line, for
// ever if never read): `yes raw/x > MNT/.prepfs/order` grew it until the OOM killer came, and so
// did a job appending epochs without a reset whose reads the page cache answered. A job holds at
// most four epochs of the tree not read yet: past that its oldest accesses are dropped.
TEST(JobKnowledge, AJobHoldsAtMostFourEpochsNotReadYet) {
  JobKnowledge k(10);
  const uint64_t most = k.max_pending();
  EXPECT_EQ(most, 4u * 10 + 65536);
  k.publish("a", {Access{1, Form::raw}});
  k.publish("a", std::vector<Access>(most - 1, Access{2, Form::raw}));
  EXPECT_EQ(k.jobs()[0].pending, most);
  EXPECT_NE(k.next_use(1), SampleKnowledge::kNever);
  k.publish("a", {Access{3, Form::raw}});
  EXPECT_EQ(k.jobs()[0].pending, most) << "past the bound";
  EXPECT_EQ(k.next_use(1), SampleKnowledge::kNever) << "the oldest access stayed";
  EXPECT_TRUE(k.note_access(2));
  EXPECT_TRUE(k.note_access(3)) << "the newest access was dropped";
  EXPECT_FALSE(k.note_access(1));

  // Through the order file: one write of many lines, held a batch at a time.
  test::TempDir d;
  d.write("src/x", "x");
  PosixSource src(d / "src");
  Tree tree = Tree::scan(src);
  ImageNames names(tree, "ppm");
  ViewPaths paths(tree, names);
  JobKnowledge fromfile(tree.size());
  auto order = open_order_session(fromfile, paths, nullptr);
  std::string lines = "job y\n";
  for (uint64_t i = 0; i < fromfile.max_pending() + 100; i++) lines += "raw/x\n";
  for (size_t off = 0; off < lines.size(); off += 1 << 20) order->write(lines.substr(off, 1 << 20));
  order->close();
  EXPECT_EQ(fromfile.jobs()[0].pending, fromfile.max_pending());
}

// A read the kernel's page cache answers never reaches the daemon. Its position stayed pending
// until the next reset: its sample ranked as needed now (belady kept it in RAM beside the
// kernel's copy), and the job's pending accesses were held from there. Once the job has read
// 4096 positions past it, it counts as done. Opportunistic jobs read in any order: not for them.
TEST(JobKnowledge, APositionTheJobReadFarPastCountsAsReadUnseen) {
  for (const bool opportunistic : {false, true}) {
    SCOPED_TRACE(opportunistic ? "opportunistic" : "in order");
    const uint32_t n = 5000;
    JobKnowledge k(n);
    if (opportunistic) k.set_opportunistic("a", true);
    std::vector<Access> order;
    for (uint32_t i = 0; i < n; i++) order.push_back({i, Form::raw});
    k.publish("a", order);
    // Sample 0 is read from the page cache; the daemon sees the others.
    for (uint32_t i = 1; i < 4096; i++) ASSERT_TRUE(k.note_access(i));
    EXPECT_NE(k.next_use(0), SampleKnowledge::kNever) << "4095 past it: a worker may still read it";
    ASSERT_TRUE(k.note_access(4096));
    EXPECT_EQ(k.next_use(0) == SampleKnowledge::kNever, !opportunistic);
    EXPECT_EQ(k.jobs()[0].pending, n - 4097u + (opportunistic ? 1 : 0));
    EXPECT_EQ(k.jobs()[0].consumed, 4096u) << "counted as a read the daemon saw";
  }
}

TEST(JobKnowledge, RepeatedAccessesOfOneSampleAreConsumedInOrder) {
  JobKnowledge k(4);
  k.publish("a", {{1, Form::raw}, {2, Form::raw}, {1, Form::raw}, {2, Form::raw}, {1, Form::raw}});
  const uint64_t first = k.next_use(1);
  EXPECT_TRUE(k.note_access(1));
  const uint64_t second = k.next_use(1);
  EXPECT_GT(second, first);
  EXPECT_TRUE(k.note_access(2));
  EXPECT_TRUE(k.note_access(1));
  EXPECT_TRUE(k.note_access(2));
  EXPECT_TRUE(k.note_access(1));
  EXPECT_FALSE(k.note_access(1));
  EXPECT_FALSE(k.has_future());
}

// Each pending access says how many of the job's pending accesses of the same sample come before
// it (the prefetcher renders the variant of that later open), also when the walk starts past the
// cursor and after some of them were read.
TEST(JobKnowledge, UpcomingAccessesCountTheSameSamplesEarlierAccesses) {
  JobKnowledge k(4);
  k.publish("a", {{1, Form::augmented}, {2, Form::augmented}, {1, Form::augmented}, {3, Form::augmented},
                  {1, Form::augmented}, {2, Form::augmented}});
  auto earlier = [&](const std::map<std::string, uint64_t>& from) {
    std::vector<std::pair<uint32_t, uint32_t>> out;  // (node, earlier)
    const std::vector<JobAhead> up = k.upcoming(from, 10);
    for (const JobAhead::Next& n : up.at(0).ahead) out.emplace_back(n.access.node, n.earlier);
    return out;
  };
  using V = std::vector<std::pair<uint32_t, uint32_t>>;
  EXPECT_EQ(earlier({}), (V{{1, 0}, {2, 0}, {1, 1}, {3, 0}, {1, 2}, {2, 1}}));
  EXPECT_EQ(earlier({{"a", 3}}), (V{{3, 0}, {1, 2}, {2, 1}}));
  EXPECT_TRUE(k.note_access(1));  // position 0
  EXPECT_EQ(earlier({}), (V{{2, 0}, {1, 0}, {3, 0}, {1, 1}, {2, 1}}));
  EXPECT_EQ(earlier({{"a", 4}}), (V{{1, 1}, {2, 1}}));
  // Only the same form counts: raw/ reads of a file choose no variant.
  JobKnowledge mixed(4);
  mixed.publish("m", {{1, Form::raw}, {1, Form::augmented}, {1, Form::raw}, {1, Form::augmented}});
  std::vector<uint32_t> counts;
  const std::vector<JobAhead> up = mixed.upcoming({{"m", 1}}, 10);
  for (const JobAhead::Next& n : up.at(0).ahead) counts.push_back(n.earlier);
  EXPECT_EQ(counts, (std::vector<uint32_t>{0, 1, 1}));
}

// Two opportunistic jobs need the same samples this epoch. What one of them reads stays for the
// other while the cache has room for it: a newer need is not refused for an older one (a policy
// keeps scores until a sample changes, so needs scored by the time they were ranked refused every
// fetch once the cache was full); among needs the least recently used goes first, and a sample
// both have read goes before any need.
TEST(Belady, OpportunisticJobsNeedsRankAlikeAndRecencyOrdersThem) {
  JobKnowledge k(16);
  std::vector<Access> all;
  for (uint32_t i = 0; i < 8; i++) all.push_back({i, Form::raw});
  for (const char* job : {"a", "b"}) {
    k.set_opportunistic(job, true);
    k.publish(job, all);
  }
  TierIndex idx(3, make_policy("belady", 1, &k));
  std::vector<CacheKey> evicted;
  auto read = [&](uint32_t x) {  // as the store does: note the read, then look up or admit
    EXPECT_TRUE(k.note_access(x));
    idx.sample_changed(x);
    if (!idx.touch(key_of(x))) idx.admit(key_of(x), 1, Form::raw, &evicted, x);
  };
  for (uint32_t x : {0, 1, 2, 3}) read(x);  // job a fetches 0..3: each still needed by b
  EXPECT_FALSE(idx.contains(key_of(0))) << "the least recent need goes first";
  for (uint32_t x : {1, 2, 3}) EXPECT_TRUE(idx.contains(key_of(x))) << x << " was refused or evicted";
  read(2);  // job b takes 2 from the cache: nobody needs it now
  read(4);
  EXPECT_FALSE(idx.contains(key_of(2))) << "a sample both jobs read goes before any need";
  for (uint32_t x : {1, 3, 4}) EXPECT_TRUE(idx.contains(key_of(x))) << x;
}

// --- the prefetcher, through a Daemon (its control files and its namespaces, no FUSE) ---

uint64_t walk(Filesystem& fs, const std::string& path) {
  uint64_t ino = 1;
  for (size_t pos = 0; pos < path.size();) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    ino = fs.lookup(ino, path.substr(pos, slash - pos)).ino;
    pos = slash + 1;
  }
  return ino;
}

void write_control(Daemon& d, const std::string& name, const std::string& text) {
  Filesystem& c = d.control_fs();
  const uint64_t ino = walk(c, name);
  OpenReply r = c.open(ino, O_WRONLY);
  c.write(ino, r.fh, 0, text);
  c.release(ino, r.fh);
}

std::string read_all(Filesystem& fs, uint64_t ino) {
  std::string out;
  for (uint64_t off = 0;;) {
    auto slices = fs.read(ino, 0, off, 1 << 20);
    if (slices.empty()) return out;
    for (const Slice& s : slices) out.append(s.data, s.len), off += s.len;
  }
}

// `files` files f100, f101, ... of 100,000 bytes each, and a Daemon over them with these options
// (RAM as given; no SSD).
struct PrefetchRig {
  static constexpr size_t kSize = 100'000;
  test::TempDir dir;
  std::unique_ptr<Daemon> d;

  PrefetchRig(int files, uint64_t ram_bytes, const std::string& options) {
    for (int i = 0; i < files; i++) dir.write("src/" + name(i), test::pattern(kSize, i));
    Options o;
    o.source = dir / "src";
    o.mountpoint = dir / "mnt";
    o.ssd_dir = dir / "cache";
    o.ram_bytes = ram_bytes;
    o.ssd_bytes = 0;
    o.log_level = "warn";
    apply_option_list(o, options);
    finalize_options(o);
    d = std::make_unique<Daemon>(o);
  }
  static std::string name(int i) { return "f" + std::to_string(100 + i); }
  uint64_t prefetched() const { return d->prefetch_counters().prefetched.load(); }
  std::string read(int i) { return read_all(d->main_fs(), walk(d->main_fs(), "raw/" + name(i))); }
  // Polls for up to 5 s.
  static bool wait_until(const std::function<bool()>& done) {
    for (int i = 0; i < 1000 && !done(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return done();
  }
};

TEST(Prefetcher, StaysWithinItsByteAndInFlightBoundsAndServesTheReads) {
  const int files = 60;
  PrefetchRig rig(files, 64 << 20, "prefetch_window=350K,prefetch_threads=2");
  Daemon& d = *rig.d;
  std::string order = "job t\n";
  for (int i = files - 1; i >= 0; i--) order += "raw/" + PrefetchRig::name(i) + "\n";
  write_control(d, "order", order);
  // Read in the published order, slower than the prefetcher runs.
  for (int i = files - 1; i >= 0; i--) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    EXPECT_EQ(rig.read(i), test::pattern(PrefetchRig::kSize, i));
  }
  Filesystem& c = d.control_fs();
  const uint64_t stats_ino = walk(c, "stats");
  OpenReply r = c.open(stats_ino, O_RDONLY);
  std::string stats;
  for (const Slice& s : c.read(stats_ino, r.fh, 0, 1 << 20)) stats.append(s.data, s.len);
  c.release(stats_ino, r.fh);
  auto number = [&](const std::string& field) {
    size_t at = stats.find("\"" + field + "\": ");
    EXPECT_NE(at, std::string::npos) << field;
    return std::stoull(stats.substr(at + field.size() + 4));
  };
  EXPECT_GT(number("prefetched"), 0u);
  EXPECT_LE(number("max_in_flight"), 2u);
  EXPECT_GT(number("max_in_flight"), 0u);
  EXPECT_LE(number("max_window_bytes"), 350u * 1024);
  EXPECT_EQ(number("unexpected_reads"), 0u);
  EXPECT_EQ(number("pending"), 0u) << "every published access was read";
}

// A job that stops reading without ending its order (its process killed) held its share of the
// window for good: the prefetcher releases a charge only when the job's cursor passes it, and the
// cursor of a dead job never moves. Every other job then got nothing prefetched. Idle past
// prefetch_idle, a job holds no window (and gets nothing prefetched) until it reads again.
TEST(Prefetcher, AJobThatStopsReadingHoldsNoWindowOnceIdle) {
  // No RAM: everything prefetched is staged, and counted in the window until read.
  PrefetchRig rig(20, 0, "prefetch_window=350K,prefetch_threads=2,prefetch_idle=1");
  auto order = [](const std::string& job, int first) {
    std::string text = "job " + job + "\n";
    for (int i = first; i < first + 10; i++) text += "raw/" + PrefetchRig::name(i) + "\n";
    return text;
  };
  write_control(*rig.d, "order", order("dead", 0));  // published, never read: the window fills
  ASSERT_TRUE(rig.wait_until([&] { return rig.prefetched() == 3; })) << rig.prefetched();
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past prefetch_idle
  EXPECT_EQ(rig.prefetched(), 3u) << "the window holds three files";
  write_control(*rig.d, "order", order("live", 10));
  EXPECT_TRUE(rig.wait_until([&] { return rig.prefetched() >= 6; })) << "the dead job held the window: "
                                                                      << rig.prefetched();
  for (int i = 10; i < 20; i++) EXPECT_EQ(rig.read(i), test::pattern(PrefetchRig::kSize, i));
  EXPECT_GE(rig.d->prefetch_counters().hits.load(), 3u);
  EXPECT_LE(rig.prefetched(), 13u) << "the idle job got more prefetched";
}

// Idle is "its reads stopped": publishing counted as activity, so a job that kept publishing and
// never read (any user may write an order) was never idle and held the window from every job.
TEST(Prefetcher, AJobThatPublishesButNeverReadsIsIdleAllTheSame) {
  PrefetchRig rig(20, 0, "prefetch_window=350K,prefetch_threads=2,prefetch_idle=1");  // no RAM: as above
  auto order = [](const std::string& job, int first, int n) {
    std::string text = "job " + job + "\n";
    for (int i = first; i < first + n; i++) text += "raw/" + PrefetchRig::name(i) + "\n";
    return text;
  };
  write_control(*rig.d, "order", order("greedy", 0, 10));
  ASSERT_TRUE(rig.wait_until([&] { return rig.prefetched() == 3; })) << rig.prefetched();
  std::atomic<bool> stop{false};
  std::thread publisher([&] {  // one more access every 100 ms, never a read
    for (int i = 0; !stop; i = (i + 1) % 10) {
      write_control(*rig.d, "order", order("greedy", i, 1));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // A job that reads, slowly: once the greedy one is idle (1 s), what it reads next is fetched ahead.
  write_control(*rig.d, "order", order("live", 10, 10));
  bool got = false;
  for (int i = 10; i < 20 && !got; i++) {
    EXPECT_EQ(rig.read(i), test::pattern(PrefetchRig::kSize, i));
    for (int t = 0; t < 80 && !got; t++) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      got = rig.prefetched() > 3;
    }
  }
  stop = true;
  publisher.join();
  EXPECT_TRUE(got) << "the publishing job held the window from the reading one";
}

// Publishing counts as activity once the job has read since: a job that reads its epoch, pauses
// past prefetch_idle (validation, whose reads are not in its order) and publishes the next epoch
// gets it fetched ahead at once, not only from its first read on.
TEST(Prefetcher, AJobThatPublishesItsNextEpochAfterAPauseIsFetchedForAgain) {
  PrefetchRig rig(20, 0, "prefetch_window=350K,prefetch_threads=2,prefetch_idle=1");  // no RAM: as above
  auto order = [](int first) {
    std::string text = "job t\n";
    for (int i = first; i < first + 3; i++) text += "raw/" + PrefetchRig::name(i) + "\n";
    return text;
  };
  write_control(*rig.d, "order", order(0));
  ASSERT_TRUE(rig.wait_until([&] { return rig.prefetched() == 3; })) << rig.prefetched();
  for (int i = 0; i < 3; i++) EXPECT_EQ(rig.read(i), test::pattern(PrefetchRig::kSize, i));
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));  // the pause, past prefetch_idle
  write_control(*rig.d, "order", order(10));
  EXPECT_TRUE(rig.wait_until([&] { return rig.prefetched() == 6; }))
      << "the next epoch waited for the job's first read: " << rig.prefetched();
}

// A read the kernel's page cache answers never reaches the daemon: its position stays unconsumed,
// and the job's cursor stops there until the next reset. The window's charges went only as the
// cursor passed them, so every later read left its charge behind and prefetching stopped after
// one window. A charge now goes when its own access is read.
TEST(Prefetcher, ReadsPastAnUnseenReadReleaseTheirWindow) {
  PrefetchRig rig(10, 0, "prefetch_window=350K,prefetch_threads=2");  // no RAM: as above
  std::string order = "job t\n";
  for (int i = 0; i < 10; i++) order += "raw/" + PrefetchRig::name(i) + "\n";
  write_control(*rig.d, "order", order);
  ASSERT_TRUE(rig.wait_until([&] { return rig.prefetched() == 3; })) << rig.prefetched();
  // f100 is read from the page cache (the daemon never sees it); f101 and f102 reach the daemon.
  for (int i = 1; i < 3; i++) EXPECT_EQ(rig.read(i), test::pattern(PrefetchRig::kSize, i));
  EXPECT_TRUE(rig.wait_until([&] { return rig.prefetched() >= 5; }))
      << "the reads past f100 did not give their window back: " << rig.prefetched();
}

}  // namespace
}  // namespace prepfs
