#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "prepfs/cache/key.h"
#include "prepfs/cache/policy.h"
#include "prepfs/cache/sample_knowledge.h"
#include "prepfs/cache/ram_tier.h"
#include "prepfs/cache/ssd_tier.h"
#include "prepfs/cache/tier_manager.h"
#include "prepfs/common/error.h"
#include "prepfs/common/private_dir.h"
#include "temp_dir.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sstream>

using namespace prepfs;

namespace {

ChunkRef chunk_of(const std::string& s) {
  auto c = Chunk::allocate(s.size());
  std::memcpy(c->mutable_data(), s.data(), s.size());
  return c;
}

std::string str(const ChunkRef& c) { return std::string(c->data(), c->size()); }

CacheKey key_for(const std::string& path, uint64_t size = 10, int64_t mtime = 1, uint64_t chunk = 0) {
  return make_key(KeyFields{path, FileVersion{size, mtime}, Form::raw, 0, 0, chunk, 1 << 20});
}

}  // namespace

TEST(Key, EveryFieldChangesTheKey) {
  KeyFields base{"a/b.jpg", FileVersion{100, 5}, Form::raw, 0, 0, 0, 1 << 20};
  CacheKey k0 = make_key(base);
  auto changed = [&](auto mutate) {
    KeyFields f = base;
    mutate(f);
    return make_key(f);
  };
  EXPECT_NE(k0, changed([](KeyFields& f) { f.path = "a/c.jpg"; }));
  EXPECT_NE(k0, changed([](KeyFields& f) { f.version.size = 101; }));
  EXPECT_NE(k0, changed([](KeyFields& f) { f.version.mtime_ns = 6; }));
  EXPECT_NE(k0, changed([](KeyFields& f) { f.version.identity = 7; }));
  EXPECT_NE(k0, changed([](KeyFields& f) { f.form = Form::decoded; }));
  EXPECT_NE(k0, changed([](KeyFields& f) { f.pipeline_hash = 1; }));
  EXPECT_NE(k0, changed([](KeyFields& f) { f.variant = 1; }));
  EXPECT_NE(k0, changed([](KeyFields& f) { f.chunk = 1; }));
  EXPECT_NE(k0, changed([](KeyFields& f) { f.chunk_size = 2 << 20; }));
  EXPECT_EQ(k0, make_key(base));
  CacheKey parsed;
  ASSERT_TRUE(CacheKey::from_hex(k0.hex(), &parsed));
  EXPECT_EQ(parsed, k0);
}

TEST(RamTier, AccountsAndEvicts) {
  TierCounters c;
  RamTier ram(25, make_policy("lru"), c);
  EXPECT_FALSE(ram.get(key_for("a")));
  EXPECT_TRUE(ram.put(key_for("a"), chunk_of("0123456789"), Form::raw));
  EXPECT_TRUE(ram.put(key_for("b"), chunk_of("abcdefghij"), Form::raw));
  EXPECT_EQ(str(ram.get(key_for("a"))), "0123456789");  // a is now more recent than b
  EXPECT_TRUE(ram.put(key_for("c"), chunk_of("ABCDEFGHIJ"), Form::raw));
  EXPECT_FALSE(ram.get(key_for("b")));
  EXPECT_TRUE(ram.get(key_for("a")));
  EXPECT_EQ(ram.stats().bytes, 20u);
  EXPECT_EQ(ram.stats().entries, 2u);
  EXPECT_EQ(load(c.evictions), 1u);
  EXPECT_EQ(load(c.hits), 2u);
  EXPECT_EQ(load(c.misses), 2u);
  EXPECT_FALSE(ram.put(key_for("big"), chunk_of(std::string(26, 'x')), Form::raw));
  EXPECT_EQ(load(c.rejected), 1u);
}

TEST(SsdTier, RoundTripsAndSurvivesRestart) {
  test::TempDir dir;
  std::string data = test::pattern(100'000, 1);
  {
    TierCounters c;
    SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
    EXPECT_FALSE(ssd.get(key_for("x")));
    ASSERT_TRUE(ssd.put_async(key_for("x"), chunk_of(data), Form::raw));
    ssd.flush();
    EXPECT_EQ(str(ssd.get(key_for("x"))), data);
    EXPECT_EQ(ssd.stats().entries, 1u);
  }
  TierCounters c;
  SsdTier again(dir.path(), 1 << 20, make_policy("lru"), c);
  EXPECT_EQ(again.stats().entries, 1u);
  ASSERT_TRUE(again.get(key_for("x")));
  EXPECT_EQ(str(again.get(key_for("x"))), data);
}

// An erase must win over a write still queued or in the writer's hands: under per-form quotas
// nothing would age a stray entry out, and a restart would load it again.
TEST(SsdTier, EraseOfAQueuedOrInFlightWriteLeavesNothingBehind) {
  test::TempDir dir;
  {
    TierCounters c;
    SsdTier ssd(dir.path(), 64 << 20, make_policy("lru"), c);
    std::string data = test::pattern(200'000, 3);
    for (int i = 0; i < 200; i++)
      ASSERT_TRUE(ssd.put_async(key_for("k" + std::to_string(i)), chunk_of(data), Form::raw));
    for (int i = 0; i < 200; i++) ssd.erase(key_for("k" + std::to_string(i)));  // most still queued, one in hand
    ssd.flush();
    EXPECT_EQ(ssd.stats().entries, 0u);
    EXPECT_EQ(ssd.stats().bytes, 0u);
    EXPECT_EQ(ssd.queued_bytes(), 0u);
    for (int i = 0; i < 200; i++) EXPECT_FALSE(ssd.get(key_for("k" + std::to_string(i)))) << i;
  }
  TierCounters c;
  SsdTier again(dir.path(), 64 << 20, make_policy("lru"), c);
  EXPECT_EQ(again.stats().entries, 0u) << "an erased entry must not come back after a restart";
}

TEST(SsdTier, AnEntryWhoseFileVanishedIsDroppedAndCanBeWrittenAgain) {
  test::TempDir dir;
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
  ASSERT_TRUE(ssd.put_async(key_for("x"), chunk_of("payload"), Form::raw));
  ssd.flush();
  ASSERT_EQ(::unlink(ssd.path_of(key_for("x"), Form::raw).c_str()), 0);  // removed from outside
  EXPECT_FALSE(ssd.get(key_for("x")));
  EXPECT_EQ(ssd.stats().entries, 0u);
  ASSERT_TRUE(ssd.put_async(key_for("x"), chunk_of("payload"), Form::raw));
  ssd.flush();
  EXPECT_EQ(str(ssd.get(key_for("x"))), "payload");
}

TEST(SsdTier, ChecksumFailureIsAMissAndRemovesTheEntry) {
  test::TempDir dir;
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
  ssd.put_async(key_for("x"), chunk_of(test::pattern(5000, 2)), Form::raw);
  ssd.flush();
  std::string path = ssd.path_of(key_for("x"), Form::raw);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(64 + 1234);
    f.put('\x5a' ^ test::pattern(5000, 2)[1234]);
  }
  EXPECT_FALSE(ssd.get(key_for("x")));
  EXPECT_EQ(load(c.corrupt), 1u);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(ssd.stats().entries, 0u);
}

TEST(SsdTier, TornWriteIsAMiss) {
  test::TempDir dir;
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
  ssd.put_async(key_for("x"), chunk_of(test::pattern(5000, 3)), Form::raw);
  ssd.flush();
  std::filesystem::resize_file(ssd.path_of(key_for("x"), Form::raw), 64 + 2000);
  EXPECT_FALSE(ssd.get(key_for("x")));
  EXPECT_EQ(load(c.corrupt), 1u);
}

// A file grown from outside (sparse, to 4 TiB) after it was indexed: refused by its size before
// anything is read or allocated. get() allocated the file's size, and threw bad_alloc.
TEST(SsdTier, AnEntryWhoseFileGrewIsRefusedWithoutReadingIt) {
  test::TempDir dir;
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
  ssd.put_async(key_for("x"), chunk_of(test::pattern(5000, 3)), Form::raw);
  ssd.flush();
  ASSERT_EQ(::truncate(ssd.path_of(key_for("x"), Form::raw).c_str(), off_t(1) << 42), 0);
  ChunkRef got;
  ASSERT_NO_THROW(got = ssd.get(key_for("x")));
  EXPECT_FALSE(got);
  EXPECT_EQ(load(c.corrupt), 1u);
}

// The same before a restart: the restart indexes the entry at its grown size (it reads no
// header), so the size check passes. The header is then read before the payload is allocated:
// the read is a miss that drops the entry, not an allocation of 4 TiB (ENOMEM on every read).
TEST(SsdTier, AnEntryThatGrewBeforeARestartIsRefusedBeforeItsSizeIsAllocated) {
  test::TempDir dir;
  const uint64_t budget = uint64_t(1) << 43;
  {
    TierCounters c;
    SsdTier ssd(dir.path(), budget, make_policy("lru"), c);
    ssd.put_async(key_for("x"), chunk_of(test::pattern(5000, 3)), Form::raw);
    ssd.flush();
    ASSERT_EQ(::truncate(ssd.path_of(key_for("x"), Form::raw).c_str(), off_t(1) << 42), 0);
  }
  TierCounters c;
  SsdTier again(dir.path(), budget, make_policy("lru"), c);
  ASSERT_EQ(again.stats().entries, 1u) << "the restart no longer indexes it: the test shows nothing";
  ChunkRef got;
  ASSERT_NO_THROW(got = again.get(key_for("x")));
  EXPECT_FALSE(got);
  EXPECT_EQ(load(c.corrupt), 1u);
  EXPECT_EQ(again.stats().entries, 0u) << "the entry stays, and fails every read";
  const std::string data = test::pattern(5000, 4);
  ASSERT_TRUE(again.put_async(key_for("x"), chunk_of(data), Form::raw));
  again.flush();
  EXPECT_EQ(str(again.get(key_for("x"))), data);
}

// A short stray copy of an entry in another fan-out directory: the restart removes the stray and
// keeps the entry. The stray was taken for the key's own file, and its removal as junk went to
// the key's directory: the good file went, the stray stayed.
TEST(SsdTier, AStrayInAnotherFanOutDirectoryLeavesTheEntryAlone) {
  test::TempDir dir;
  TierCounters c;
  std::string good, stray;
  {
    SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
    ssd.put_async(key_for("x"), chunk_of(test::pattern(5000, 4)), Form::raw);
    ssd.flush();
    good = ssd.path_of(key_for("x"), Form::raw);
    const std::filesystem::path p(good);
    const std::string other = p.parent_path().filename() == "00" ? "01" : "00";
    std::filesystem::create_directories(p.parent_path().parent_path() / other);
    ::chmod((p.parent_path().parent_path() / other).c_str(), 0700);
    stray = (p.parent_path().parent_path() / other / p.filename()).string();
    std::ofstream(stray, std::ios::binary) << "short";
  }
  TierCounters c2;
  SsdTier again(dir.path(), 1 << 20, make_policy("lru"), c2);
  EXPECT_TRUE(std::filesystem::exists(good));
  EXPECT_FALSE(std::filesystem::exists(stray));
  const ChunkRef got = again.get(key_for("x"));
  ASSERT_TRUE(got);
  EXPECT_EQ(str(got), test::pattern(5000, 4));
}

TEST(SsdTier, EntryUnderAnotherKeyIsNotServed) {
  test::TempDir dir;
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
  ssd.put_async(key_for("a"), chunk_of("aaaa"), Form::raw);
  ssd.put_async(key_for("b"), chunk_of("bbbb"), Form::raw);
  ssd.flush();
  // A file renamed onto another key's name (say, by a buggy copy) carries the wrong key inside.
  std::filesystem::rename(ssd.path_of(key_for("a"), Form::raw), ssd.path_of(key_for("b"), Form::raw));
  EXPECT_FALSE(ssd.get(key_for("b")));
  EXPECT_EQ(load(c.corrupt), 1u);
}

TEST(SsdTier, ChangedKeyMisses) {
  test::TempDir dir;
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
  ssd.put_async(key_for("a", 10, 1), chunk_of("0123456789"), Form::raw);
  ssd.flush();
  EXPECT_TRUE(ssd.get(key_for("a", 10, 1)));
  EXPECT_FALSE(ssd.get(key_for("a", 10, 2)));  // same path, new mtime: a new version
  EXPECT_FALSE(ssd.get(key_for("a", 11, 1)));
}

TEST(SsdTier, BudgetHoldsOnDisk) {
  test::TempDir dir;
  TierCounters c;
  const uint64_t budget = 50'000;
  SsdTier ssd(dir.path(), budget, make_policy("lru"), c);
  for (int i = 0; i < 40; i++) {
    ssd.put_async(key_for("f" + std::to_string(i)), chunk_of(test::pattern(3000, i)), Form::raw);
    ssd.flush();
    uint64_t on_disk = 0;
    for (auto& e : std::filesystem::recursive_directory_iterator(dir.path()))
      if (e.is_regular_file()) on_disk += e.file_size();
    ASSERT_LE(on_disk, budget);
    ASSERT_LE(ssd.stats().bytes, budget);
  }
  EXPECT_GT(load(c.evictions), 0u);
}

TEST(TierManager, ConcurrentMissesFillOnce) {
  test::TempDir dir;
  CacheConfig cfg{1 << 20, 1 << 20, dir.path(), "lru"};
  TierManager tm(cfg);
  std::atomic<int> fills{0};
  std::vector<std::thread> threads;
  std::vector<std::string> got(16);
  for (int t = 0; t < 16; t++)
    threads.emplace_back([&, t] {
      got[t] = str(tm.get_or_fill(key_for("x"), Form::raw, [&] {
        fills++;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return chunk_of("payload");
      }));
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(fills.load(), 1);
  for (auto& g : got) EXPECT_EQ(g, "payload");
}

TEST(TierManager, FillErrorsReachEveryWaiterAndAreNotCached) {
  test::TempDir dir;
  TierManager tm(CacheConfig{1 << 20, 0, dir.path(), "lru"});
  std::atomic<int> fills{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; t++)
    threads.emplace_back([&] {
      try {
        tm.get_or_fill(key_for("x"), Form::raw, [&]() -> ChunkRef {
          fills++;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the others join this fill
          throw Error(EIO, "boom");
        });
      } catch (const Error& e) {
        if (e.err() == EIO) errors++;
      }
    });
  for (auto& th : threads) th.join();
  // Every caller saw the error; the 16 callers shared far fewer fills than 16 (a caller arriving
  // after a failed fill starts its own: errors are not cached).
  EXPECT_EQ(errors.load(), 16);
  EXPECT_LT(fills.load(), 16);
  EXPECT_GT(load(tm.counters().joined), 0u);
  EXPECT_EQ(str(tm.get_or_fill(key_for("x"), Form::raw, [] { return chunk_of("ok"); })), "ok");
}

TEST(TierManager, SsdHitIsPromotedToRam) {
  test::TempDir dir;
  {
    TierManager tm(CacheConfig{1 << 20, 1 << 20, dir.path(), "lru"});
    tm.get_or_fill(key_for("x"), Form::raw, [] { return chunk_of("from source"); });
  }  // destructor drains the write queue
  TierManager tm(CacheConfig{1 << 20, 1 << 20, dir.path(), "lru"});
  int fills = 0;
  auto fill = [&] {
    fills++;
    return chunk_of("WRONG");
  };
  EXPECT_EQ(str(tm.get_or_fill(key_for("x"), Form::raw, fill)), "from source");
  EXPECT_EQ(str(tm.get_or_fill(key_for("x"), Form::raw, fill)), "from source");
  EXPECT_EQ(fills, 0);
  EXPECT_EQ(load(tm.counters().ssd.hits), 1u);
  EXPECT_EQ(load(tm.counters().ram.hits), 1u);
}

// A chunk the RAM tier refuses (larger than its budget) is still at hand for the file's next
// read requests: the kernel asks for one chunk in several requests, and each used to refetch it.
TEST(TierManager, AChunkTheRamTierRefusesIsNotFetchedAgain) {
  test::TempDir dir;
  TierManager tm(CacheConfig{512 << 10, 0, dir.path(), "lru"});
  int fills = 0;
  auto fill = [&] {
    fills++;
    return chunk_of(test::pattern(1 << 20, 4));
  };
  for (int request = 0; request < 8; request++) tm.get_or_fill(key_for("big"), Form::raw, fill);
  EXPECT_EQ(fills, 1);
  EXPECT_EQ(tm.stats(Tier::ram).entries, 0u);
}

// The recent fills live in the room the RAM tier's entries leave free, and give it back first.
// A ranking policy's admission may evict within the newcomer's form (to its quota) and then refuse
// it at the budget (the next victim ranks better than the newcomer). What the form's step evicted
// left the index, but the tier kept serving it: never evicted again, over budget, one more such
// chunk at every other admission. Whatever leaves the index leaves the tier, admitted or not.
TEST(RamTier, ARefusedAdmissionLeavesNothingTheIndexNoLongerCounts) {
  struct Future : SampleKnowledge {
    uint64_t next_use(uint32_t s) const override { return std::array<uint64_t, 5>{100, 90, 10, 5, 50}[s]; }
    double importance(uint32_t) const override { return 1; }
    bool has_future() const override { return true; }
    uint64_t generation() const override { return 1; }
  } knows;
  TierCounters c;
  RamTier ram(4, make_policy("belady", 1, &knows), c);
  std::vector<CacheKey> k;
  for (int i = 0; i < 5; i++) k.push_back(key_for("s" + std::to_string(i)));
  ASSERT_TRUE(ram.put(k[0], chunk_of("a"), Form::raw, 0));
  ASSERT_TRUE(ram.put(k[1], chunk_of("b"), Form::raw, 1));
  ASSERT_TRUE(ram.put(k[2], chunk_of("c"), Form::decoded, 2));
  ASSERT_TRUE(ram.put(k[3], chunk_of("d"), Form::decoded, 3));
  ram.set_form_quotas({3, 1, 0});  // a re-plan: decoded is above its new quota
  // raw's step evicts s0 (used at 100) for s4 (50); the budget's victim, s2 (10), ranks better.
  EXPECT_FALSE(ram.put(k[4], chunk_of("xx"), Form::raw, 4));
  size_t served = 0;
  for (int i = 0; i < 5; i++) {
    const bool held = ram.get(k[i]) != nullptr;
    EXPECT_EQ(ram.contains(k[i]), held) << "s" << i << (held ? " is served but not counted" : " is counted but gone");
    served += held;
  }
  EXPECT_EQ(ram.stats().entries, served);
  EXPECT_LE(ram.stats().bytes, 4u);
}

TEST(RamTier, RecentFillsCountAgainstTheBudget) {
  TierCounters c;
  const uint64_t mib = 1 << 20, budget = 24 * mib;
  RamTier ram(budget, make_policy("lru"), c);
  std::string one_mib = test::pattern(mib, 5);
  for (int i = 0; i < 30; i++) ASSERT_TRUE(ram.put_recent(key_for("r" + std::to_string(i)), chunk_of(one_mib)));
  EXPECT_EQ(ram.recent_stats().bytes, budget);  // the oldest six gave way
  EXPECT_FALSE(ram.get_recent(key_for("r0")));
  EXPECT_TRUE(ram.get_recent(key_for("r29")));
  for (int i = 0; i < 16; i++) ASSERT_TRUE(ram.put(key_for("e" + std::to_string(i)), chunk_of(one_mib), Form::raw));
  EXPECT_EQ(ram.stats().bytes, 16 * mib);
  EXPECT_EQ(ram.stats().bytes + ram.recent_stats().bytes, budget);
  // Full of entries, the recent fills keep their floor (a read split into requests still needs them).
  for (int i = 16; i < 24; i++) ASSERT_TRUE(ram.put(key_for("e" + std::to_string(i)), chunk_of(one_mib), Form::raw));
  EXPECT_EQ(ram.stats().bytes, budget);
  EXPECT_EQ(ram.recent_stats().bytes, RamTier::kRecentFloor);
  EXPECT_TRUE(ram.get_recent(key_for("r29")));
  EXPECT_FALSE(ram.put_recent(key_for("too big"), chunk_of(std::string(RamTier::kRecentFloor + 1, 'x'))));
}

// The SSD tier's directory holds bytes served as the source's: one that others can write, or
// that belongs to someone else, is refused with a clear error.
TEST(SsdTier, RefusesADirectoryOthersCanWrite) {
  test::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  TierCounters c;
  try {
    SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
    FAIL() << "a world-writable directory was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EACCES);
    EXPECT_NE(std::string(e.what()).find("writable by its group or by others"), std::string::npos) << e.what();
  }
}

// The cache directory was checked, but not the directories above it: whoever could write one of
// them (or owned it) could move the checked directory away after the check and put their own in
// its place, and the index and cache files, reached by path, were then theirs to plant or read.
// Each directory above must be root's or the daemon's user's, and writable by nobody else unless
// sticky (as /tmp). The directory goes by its resolved path from then on.
TEST(PrivateDir, EveryDirectoryAboveTheCacheIsTheDaemonsOrRootsAndClosedToOthers) {
  test::TempDir dir;
  auto refusal = [](const std::string& path) -> std::string {
    try {
      PrivateDir::open_path(path);
      return "";
    } catch (const Error& e) {
      EXPECT_EQ(e.err(), EACCES) << e.what();
      return e.what();
    }
  };
  const std::string open = dir / "open", sticky = dir / "sticky";
  ASSERT_EQ(::mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  ASSERT_EQ(::mkdir(sticky.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  const std::string why = refusal(open + "/a/cache");
  EXPECT_NE(why.find("inside " + open + " (uid"), std::string::npos) << why;
  EXPECT_NE(why.find("others may write"), std::string::npos) << why;
  EXPECT_EQ(refusal(sticky + "/cache"), "") << "a sticky directory, as /tmp, lets nobody move another's entry";
  // Through a symlink: the resolved path, checked all the way up.
  std::filesystem::create_symlink(open + "/a", dir / "link");
  EXPECT_NE(refusal(dir / "link/cache"), "") << "a symlink hid the open directory above";
  std::filesystem::create_symlink(sticky, dir / "tolink");
  EXPECT_EQ(PrivateDir::open_path(dir / "tolink/cache").path(), sticky + "/cache");
  // Writable by its group: refused, unless that group is the daemon's own and lists nobody (a
  // user-private group, as umask 002 leaves ~/.cache on Fedora).
  if (geteuid() == 0) {  // (giving a directory to another group needs root)
    const std::string group_of_others = dir / "group_of_others";
    ASSERT_EQ(::mkdir(group_of_others.c_str(), 0700), 0);
    ASSERT_EQ(::chown(group_of_others.c_str(), 0, 4242), 0);
    ASSERT_EQ(::chmod(group_of_others.c_str(), 0770), 0);
    EXPECT_NE(refusal(group_of_others + "/cache"), "");
  }
  const group* own = getgrgid(getegid());
  if (own && (!own->gr_mem || !own->gr_mem[0])) {
    const std::string group_of_mine = dir / "group_of_mine";
    ASSERT_EQ(::mkdir(group_of_mine.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(group_of_mine.c_str(), 0770), 0);
    EXPECT_EQ(refusal(group_of_mine + "/cache"), "") << "the daemon's own private group";
  }
  if (geteuid() == 0) {  // a directory above owned by another user
    const std::string theirs = dir / "theirs";
    ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((theirs + "/cache").c_str(), 0700), 0);
    ASSERT_EQ(::chown(theirs.c_str(), 4242, 4242), 0);
    const std::string owned = refusal(theirs + "/cache");
    EXPECT_NE(owned.find("another user owns"), std::string::npos) << owned;
  }
}

TEST(SsdTier, RefusesADirectoryOwnedBySomeoneElse) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  test::TempDir dir;
  ASSERT_EQ(::chown(dir.path().c_str(), 4242, 4242), 0);
  TierCounters c;
  try {
    SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
    FAIL() << "a directory of uid 4242 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EACCES);
    EXPECT_NE(std::string(e.what()).find("owned by uid 4242"), std::string::npos) << e.what();
  }
}

TEST(SsdTier, ItsDirectoriesAndFilesArePrivate) {
  test::TempDir dir;
  TierCounters c;
  SsdTier ssd(dir.path() + "/tier", 1 << 20, make_policy("lru"), c);
  ASSERT_TRUE(ssd.put_async(key_for("x"), chunk_of("payload"), Form::raw));
  ASSERT_TRUE(ssd.flush());
  const std::string entry = ssd.path_of(key_for("x"), Form::raw);
  auto mode = [](const std::string& p) {
    struct stat st;
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  for (const std::string& d : {dir.path() + "/tier", dir.path() + "/tier/chunks", dir.path() + "/tier/tmp",
                               std::filesystem::path(entry).parent_path().string()})
    EXPECT_EQ(mode(d), 0700u) << d;
  EXPECT_EQ(mode(entry), 0600u);
}

// A fan-out directory replaced by a symlink is never followed (nothing behind it is loaded, read
// or deleted), and neither is an entry file replaced by a symlink to a valid copy of itself.
TEST(SsdTier, NeverFollowsASymlinkedDirectoryOrEntry) {
  test::TempDir dir, elsewhere;
  const std::string data = test::pattern(5000, 9);
  std::string entry;
  {
    TierCounters c;
    SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
    ASSERT_TRUE(ssd.put_async(key_for("x"), chunk_of(data), Form::raw));
    ASSERT_TRUE(ssd.flush());
    entry = ssd.path_of(key_for("x"), Form::raw);
  }
  namespace fs = std::filesystem;
  const fs::path fanout = fs::path(entry).parent_path();
  const fs::path moved = fs::path(elsewhere.path()) / fanout.filename();
  fs::rename(fanout, moved);
  fs::create_directory_symlink(moved, fanout);
  {
    TierCounters c;
    SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
    EXPECT_EQ(ssd.stats().entries, 0u);
    EXPECT_FALSE(ssd.get(key_for("x")));
    EXPECT_TRUE(fs::exists(moved / fs::path(entry).filename()));
  }
  fs::remove(fanout);
  fs::rename(moved, fanout);
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c);
  ASSERT_EQ(ssd.stats().entries, 1u);
  const fs::path copy = fs::path(elsewhere.path()) / "copy";
  fs::copy_file(entry, copy);
  fs::remove(entry);
  fs::create_symlink(copy, entry);
  EXPECT_FALSE(ssd.get(key_for("x")));
  EXPECT_TRUE(fs::exists(copy));
  EXPECT_FALSE(fs::exists(fs::symlink_status(entry)));
}

namespace {

// A write the SSD tier's writer blocks in until the test opens the gate: a disk slower than any
// bound, without timing.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> entered{0};
  std::atomic<bool> armed{false};
  int wait() {
    entered++;
    std::unique_lock l(m);
    cv.wait(l, [&] { return open; });
    return 0;
  }
  // Blocks only the first call once armed: one job of the writer's, not every one. True if it did.
  bool wait_if_armed() {
    if (!armed.exchange(false)) return false;
    wait();
    return true;
  }
  void until_entered() const {
    while (entered == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void release() {
    {
      std::lock_guard l(m);
      open = true;
    }
    cv.notify_all();
  }
};

// A write of `bytes` under key lands and reads back (no doom left over from earlier drops it).
void expect_next_write_lands(SsdTier& ssd, const CacheKey& key, const std::string& bytes, const char* why) {
  ASSERT_TRUE(ssd.put_async(key, chunk_of(bytes), Form::raw));
  ASSERT_TRUE(ssd.flush());
  const ChunkRef got = ssd.get(key);
  ASSERT_TRUE(got) << why;
  EXPECT_EQ(str(got), bytes);
}

size_t files_under(const std::string& dir) {
  size_t n = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n++;
  return n;
}

}  // namespace

// .prepfs/evict used to wait for the SSD write queue to drain, which under steady misses never
// happens. Queued writes are dropped now, and the one in the writer's hands is doomed.
TEST(TierManager, EvictAllDoesNotWaitForTheSsdQueue) {
  test::TempDir dir;
  Gate gate;
  CacheConfig cfg{1 << 20, 64 << 20, dir.path(), "lru"};
  cfg.ssd_options.write_fault = [&](const CacheKey&) { return gate.wait(); };
  TierManager tm(cfg);
  for (int i = 0; i < 20; i++)
    tm.get_or_fill(key_for("k" + std::to_string(i)), Form::raw, [&] { return chunk_of(test::pattern(1000, i)); });
  gate.until_entered();
  EXPECT_FALSE(tm.flush(std::chrono::milliseconds(20)));  // the writer is stuck: flush gives up
  auto evicted = std::async(std::launch::async, [&] { tm.evict_all(); });
  const bool returned = evicted.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  gate.release();
  ASSERT_TRUE(returned) << "evict_all waited for the SSD write queue";
  ASSERT_TRUE(tm.flush());
  EXPECT_EQ(tm.stats(Tier::ram).entries, 0u);
  EXPECT_EQ(tm.stats(Tier::ssd).entries, 0u);
  EXPECT_EQ(files_under(dir.path()), 0u) << "a write queued before the eviction landed after it";
  EXPECT_EQ(gate.entered, 1) << "queued writes were written instead of dropped";
}

// The writer's job is "in hand" until it takes the next one, but it reads its doom only once. An
// erase after that read used to doom the key all the same, and the doom then dropped the key's
// next write, however much later it came.
TEST(SsdTier, AnEraseAfterTheWriterIsDoneWithAJobSparesTheKeysNextWrite) {
  test::TempDir dir;
  Gate gate;
  gate.armed = true;
  SsdTierOptions o;
  o.job_done = [&](const CacheKey&) { gate.wait_if_armed(); };
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c, o);
  const CacheKey k = key_for("k");
  ASSERT_TRUE(ssd.put_async(k, chunk_of(test::pattern(2 << 20, 1)), Form::raw));  // over the budget
  gate.until_entered();
  EXPECT_EQ(load(c.rejected), 1u);
  ssd.erase(k);  // the writer still holds the refused job
  gate.release();
  ASSERT_TRUE(ssd.flush());
  expect_next_write_lands(ssd, k, "small", "an erase of a job already done with dropped the next write");
}

// A write erased while it is being written, whose write then fails: the doom went unread (only a
// successful write read it) and dropped the key's next write.
TEST(SsdTier, AnEraseDuringAWriteThatFailsSparesTheKeysNextWrite) {
  test::TempDir dir;
  Gate gate;
  gate.armed = true;
  SsdTierOptions o;
  o.write_fault = [&](const CacheKey&) { return gate.wait_if_armed() ? EIO : 0; };
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c, o);
  const CacheKey k = key_for("k");
  ASSERT_TRUE(ssd.put_async(k, chunk_of("first"), Form::raw));
  gate.until_entered();
  ssd.erase(k);  // the write is admitted and under way: it is doomed
  gate.release();
  ASSERT_TRUE(ssd.flush());
  EXPECT_EQ(load(c.write_errors), 1u);
  expect_next_write_lands(ssd, k, "second", "the failed write's doom dropped the next write");
}

// A write of the key that comes after an erase of the key's write under way (a new fill once the
// entry was erased) is kept: it used to see the doomed write still indexed, take itself for
// written already, and go with the doomed one.
TEST(SsdTier, AWriteAfterAnEraseOfTheWriteUnderWayLands) {
  for (const bool spare : {false, true}) {
    SCOPED_TRACE(spare ? "spare copies" : "planned entries");
    test::TempDir dir;
    Gate gate;
    gate.armed = true;
    SsdTierOptions o;
    o.write_fault = [&](const CacheKey&) {
      gate.wait_if_armed();
      return 0;
    };
    TierCounters c;
    SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c, o);
    const CacheKey k = key_for("k");
    auto put = [&](const std::string& bytes) {
      return spare ? ssd.put_spare_async(k, chunk_of(bytes), Form::raw) : ssd.put_async(k, chunk_of(bytes), Form::raw);
    };
    ASSERT_TRUE(put("old"));
    gate.until_entered();  // admitted, and being written
    ssd.erase(k);
    ASSERT_TRUE(put("new"));
    gate.release();
    ASSERT_TRUE(ssd.flush());
    const ChunkRef got = ssd.get(k);
    ASSERT_TRUE(got) << "the write after the erase was dropped with the erased one";
    EXPECT_EQ(str(got), "new");
    EXPECT_EQ(files_under(dir.path()), 1u);
  }
}

// An erase while the writer holds a planned write that would replace a spare copy of the key: the
// spare goes at once, and the planned write never lands. (The erase used to see the spare's name,
// take the write for landed, remove the spare, and let the write land after it.)
TEST(SsdTier, AnEraseWhileAWriteIsInHandRemovesTheSpareAndTheWrite) {
  test::TempDir dir;
  Gate gate;
  SsdTierOptions o;
  o.job_taken = [&](const CacheKey&) { gate.wait_if_armed(); };
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c, o);
  const CacheKey k = key_for("k");
  ASSERT_TRUE(ssd.put_spare_async(k, chunk_of("spare"), Form::raw));
  ASSERT_TRUE(ssd.flush());
  ASSERT_TRUE(ssd.contains_spare(k));
  gate.armed = true;
  ASSERT_TRUE(ssd.put_async(k, chunk_of("planned"), Form::raw));
  gate.until_entered();
  ssd.erase(k);
  EXPECT_FALSE(ssd.get(k)) << "the spare outlived the erase";
  gate.release();
  ASSERT_TRUE(ssd.flush());
  EXPECT_FALSE(ssd.get(k)) << "the write in hand landed after the erase";
  EXPECT_EQ(ssd.stats().entries, 0u);
  EXPECT_EQ(files_under(dir.path()), 0u);
}

// An erase forgets the entry under the tier's lock and unlinks its file after it. A new write of
// the key (same file name) published in between used to be removed by that late unlink, leaving
// an entry indexed with no file: the writer now waits for the key's unlinks before it publishes.
TEST(SsdTier, AnUnlinkThatComesLateSparesTheKeysNewEntry) {
  test::TempDir dir;
  Gate gate;
  std::atomic<bool> waiting{false}, written{false};
  SsdTierOptions o;
  o.before_unlink = [&](const CacheKey&) { gate.wait_if_armed(); };
  o.waits_for_unlink = [&](const CacheKey&) { waiting = true; };
  o.job_done = [&](const CacheKey&) { written = true; };
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c, o);
  const CacheKey k = key_for("k");
  ASSERT_TRUE(ssd.put_async(k, chunk_of("old"), Form::raw));
  ASSERT_TRUE(ssd.flush());
  gate.armed = true;
  std::thread eraser([&] { ssd.erase(k); });  // forgets, then pauses before its unlink
  gate.until_entered();
  written = false;
  ASSERT_TRUE(ssd.put_async(k, chunk_of("new"), Form::raw));
  // The unlink goes on once the writer either waits for it (the fix) or has published without
  // waiting (the bug: then the unlink removes the new file), whatever the machine's speed.
  while (!waiting && !written) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(waiting) << "the writer published while an unlink of its key was under way";
  gate.release();
  eraser.join();
  ASSERT_TRUE(ssd.flush());
  const ChunkRef got = ssd.get(k);
  ASSERT_TRUE(got) << "the erase's late unlink removed the new entry's file";
  EXPECT_EQ(str(got), "new");
  EXPECT_EQ(files_under(dir.path()), 1u);
}

// A read that finds its entry's file gone drops the entry, but only the one it found: an erase
// and a new write of the key (same file name) may come between its lookup and its drop. It used
// to drop whatever the key had by then, the new write's entry and file too.
TEST(SsdTier, AReadDropsTheEntryItFoundNotANewerOne) {
  test::TempDir dir;
  SsdTier* tier = nullptr;
  const CacheKey k = key_for("k");
  std::atomic<bool> armed{false};
  SsdTierOptions o;
  o.before_drop = [&](const CacheKey&) {
    if (!armed.exchange(false)) return;
    tier->erase(k);  // what a last use or a re-plan does
    ASSERT_TRUE(tier->put_async(k, chunk_of("new"), Form::raw));
    ASSERT_TRUE(tier->flush());
  };
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c, o);
  tier = &ssd;
  ASSERT_TRUE(ssd.put_async(k, chunk_of("old"), Form::raw));
  ASSERT_TRUE(ssd.flush());
  for (auto& e : std::filesystem::recursive_directory_iterator(dir.path()))
    if (e.is_regular_file()) std::filesystem::remove(e.path());  // removed from outside
  armed = true;
  EXPECT_FALSE(ssd.get(k));  // a miss: the file it found is gone
  const ChunkRef got = ssd.get(k);
  ASSERT_TRUE(got) << "the read dropped the entry written after its lookup";
  EXPECT_EQ(str(got), "new");
  EXPECT_EQ(files_under(dir.path()), 1u);
}

// An SSD tier of 1 MiB whose disk is full while `full` is set, with `free_bytes` free, probed
// again at every write; put(i) writes entry k<i> of 10,000 bytes and waits for it.
struct FullDiskSsd {
  static constexpr uint64_t kBudget = 1 << 20, kEntry = 10'000 + sizeof(SsdEntryHeader);
  test::TempDir dir;
  std::atomic<bool> full{false};
  std::atomic<uint64_t> free_bytes{0};
  TierCounters c;
  std::unique_ptr<SsdTier> ssd;

  FullDiskSsd() {
    SsdTierOptions o;
    o.write_fault = [this](const CacheKey&) { return full ? ENOSPC : 0; };
    o.free_bytes = [this] { return free_bytes.load(); };
    o.reprobe_interval = std::chrono::milliseconds(0);
    ssd = std::make_unique<SsdTier>(dir.path(), kBudget, make_policy("lru"), c, o);
  }
  void put(int i) {
    ASSERT_TRUE(ssd->put_async(key_for("k" + std::to_string(i)), chunk_of(test::pattern(10'000, i)), Form::raw));
    ASSERT_TRUE(ssd->flush());
  }
};

// ENOSPC lowers the budget to what fits, and the budget grows back once the disk has room again
// (it used to stay lowered for good).
TEST(SsdTier, AFullDiskLowersTheBudgetUntilRoomComesBack) {
  FullDiskSsd t;
  SsdTier& ssd = *t.ssd;
  const uint64_t entry = FullDiskSsd::kEntry;
  for (int i = 0; i < 10; i++) t.put(i);
  EXPECT_EQ(ssd.stats().bytes, 10 * entry);
  t.full = true;
  t.put(10);
  EXPECT_EQ(load(t.c.write_errors), 1u);
  EXPECT_EQ(ssd.stats().budget, 10 * entry / 10 * 9);
  EXPECT_LE(ssd.stats().bytes, ssd.stats().budget);
  t.full = false;
  t.put(11);  // no free space yet: the budget stays where it is
  EXPECT_EQ(ssd.stats().budget, 10 * entry / 10 * 9);
  t.free_bytes = 100 << 20;
  t.put(12);
  EXPECT_EQ(ssd.stats().budget, FullDiskSsd::kBudget);
  EXPECT_TRUE(ssd.get(key_for("k12")));
}

// A TierManager whose SSD (1 MiB) is full while `full` is set, with `free_bytes()` free, probed
// again at every chance; fill(name) reads a 10,000-byte chunk that RAM keeps (a spare copy of
// it is queued for the SSD) and waits for the SSD's queue.
struct FullDiskManager {
  test::TempDir dir;
  std::atomic<bool> full{false};
  std::function<uint64_t()> free_bytes = [] { return uint64_t(0); };
  std::unique_ptr<TierManager> tm;

  FullDiskManager() {
    CacheConfig cfg{64 << 20, 1 << 20, dir.path(), "lru"};
    cfg.ssd_options.write_fault = [this](const CacheKey&) { return full ? ENOSPC : 0; };
    cfg.ssd_options.free_bytes = [this] { return free_bytes(); };
    cfg.ssd_options.reprobe_interval = std::chrono::milliseconds(0);
    tm = std::make_unique<TierManager>(cfg);
  }
  void fill(const std::string& name) {
    tm->get_or_fill(key_for(name), Form::raw, [] { return chunk_of(test::pattern(10'000, 1)); },
                    Admission{true, false});
  }
  // The disk full for one spare copy (the SSD holding nothing else): what the budget comes down to.
  uint64_t budget_after_a_full_disk() {
    full = true;
    fill("s1");
    tm->flush();
    full = false;
    return tm->ssd()->stats().budget;
  }
};

// A full disk while the tier held nothing (the plan keeps everything in RAM: the SSD has spare
// copies only) lowers the budget to 0. Spares were then refused at their gate, so no write ever
// reached the writer, whose loop alone probed for room again: no spare copy until a restart.
TEST(TierManager, SpareCopiesComeBackAfterAFullDiskLeftTheSsdEmpty) {
  FullDiskManager t;
  ASSERT_EQ(t.budget_after_a_full_disk(), 0u);
  t.free_bytes = [] { return uint64_t(100) << 20; };
  t.fill("s2");
  ASSERT_TRUE(t.tm->flush());
  EXPECT_TRUE(t.tm->ssd()->contains_spare(key_for("s2")));
}

// That probe is a statvfs of the cache's disk. It ran under the lock every miss takes (the end of
// a fill's flight), so a slow or hung disk held up every other fill, the cache's RAM hits' too.
TEST(TierManager, AProbeForRoomOnAFullSsdHoldsUpNoOtherFill) {
  FullDiskManager t;
  ASSERT_EQ(t.budget_after_a_full_disk(), 0u);
  Gate gate;
  std::atomic<std::thread::id> prober{};
  t.free_bytes = [&] {
    if (std::this_thread::get_id() == prober.load()) gate.wait();  // a disk that hangs, for one caller
    return uint64_t(0);
  };
  auto probing = std::async(std::launch::async, [&] {
    prober = std::this_thread::get_id();
    t.fill("s2");
  });
  gate.until_entered();
  auto other = std::async(std::launch::async, [&] { t.fill("other"); });
  const bool finished = other.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  gate.release();
  probing.get();
  other.get();
  EXPECT_TRUE(finished) << "a fill waited for another fill's probe of the disk";
}

// A disk that fails every write (EIO, a read-only remount) logged a warning per write, a line
// for every miss under steady reads. One now and then, with the count so far.
TEST(SsdTier, ADiskThatFailsEveryWriteIsNotLoggedForEach) {
  test::TempDir dir;
  SsdTierOptions o;
  o.write_fault = [](const CacheKey&) { return EIO; };
  TierCounters c;
  SsdTier ssd(dir.path(), 1 << 20, make_policy("lru"), c, o);
  std::ostringstream lines;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_st>(lines)));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; i++) {
    ssd.put_async(key_for("k" + std::to_string(i)), chunk_of(test::pattern(1000, i)), Form::raw);
    ssd.flush();
  }
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0).count();
  spdlog::set_default_logger(previous);
  EXPECT_EQ(load(c.write_errors), 50u);
  const std::string log = lines.str();
  // One line per 10 s: one, unless a slow run (a sanitizer's) took longer.
  EXPECT_GE(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_LE(std::count(log.begin(), log.end(), '\n'), 1 + secs / 10) << log;
  EXPECT_NE(log.find("Input/output error"), std::string::npos) << log;
  EXPECT_EQ(ssd.stats().entries, 0u);
}

// Per-form quotas are shares of the SSD's budget and follow it. A re-plan while a full disk had
// lowered the budget set them in bytes of the lowered budget, and they stayed there once room
// came back (a form at its quota refuses): ssd= was never reached again.
TEST(SsdTier, QuotasFollowTheBudgetAFullDiskLowersAndRoomRaises) {
  FullDiskSsd t;
  SsdTier& ssd = *t.ssd;
  for (int i = 0; i < 10; i++) t.put(i);
  t.full = true;
  t.put(10);
  const uint64_t lowered = ssd.stats().budget;
  ASSERT_LT(lowered, FullDiskSsd::kBudget);
  ssd.set_form_shares({1, 0, 0});  // a re-plan while the budget is lowered
  EXPECT_EQ(ssd.stats().quota_of(Form::raw), lowered);
  t.full = false;
  t.free_bytes = 100 << 20;
  for (int i = 11; i < 40; i++) t.put(i);
  EXPECT_EQ(ssd.stats().budget, FullDiskSsd::kBudget);
  EXPECT_EQ(ssd.stats().quota_of(Form::raw), FullDiskSsd::kBudget);
  EXPECT_GT(ssd.stats().bytes, lowered) << "the raw quota stayed at the lowered budget";
  EXPECT_GE(ssd.stats().bytes, 30 * FullDiskSsd::kEntry);
}

// A reader that joins another reader's fill waits at most fill_wait, then fails with ETIMEDOUT;
// the fill itself goes on and lands for the next reader.
TEST(TierManager, AJoinedFillIsWaitedForAtMostFillWait) {
  test::TempDir dir;
  CacheConfig cfg{1 << 20, 0, dir.path(), "lru"};
  cfg.fill_wait = std::chrono::milliseconds(50);
  TierManager tm(cfg);
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  auto filler = std::async(std::launch::async, [&] {
    return str(tm.get_or_fill(key_for("x"), Form::raw, [&] {
      gate.wait();
      return chunk_of("late");
    }));
  });
  while (load(tm.counters().fills) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  try {
    tm.get_or_fill(key_for("x"), Form::raw, [] { return chunk_of("second fill"); });
    ADD_FAILURE() << "waited without a bound";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), ETIMEDOUT);
  }
  EXPECT_EQ(load(tm.counters().join_timeouts), 1u);
  go.set_value();
  EXPECT_EQ(filler.get(), "late");
  EXPECT_EQ(str(tm.get_or_fill(key_for("x"), Form::raw, [] { return chunk_of("refetched"); })), "late");
}

// A fill of "x" that fails with what `fail` throws once a reader has joined it: the filler's errno,
// and what the reader got (its bytes, or its error's message).
struct JoinedFailure {
  int filler_err;
  std::string reader;
};
JoinedFailure join_a_fill_that_fails(TierManager& tm, const std::function<void()>& fail) {
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  auto filler = std::async(std::launch::async, [&] {
    try {
      tm.get_or_fill(key_for("x"), Form::raw, [&]() -> ChunkRef {
        gate.wait();
        fail();
        return nullptr;
      });
      return 0;
    } catch (const Error& e) {
      return e.err();
    }
  });
  while (load(tm.counters().fills) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto reader = std::async(std::launch::async, [&]() -> std::string {
    try {
      return str(tm.get_or_fill(key_for("x"), Form::raw, [] { return chunk_of("the reader's"); }));
    } catch (const Error& e) {
      return e.what();
    }
  });
  while (load(tm.counters().joined) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  go.set_value();
  return {filler.get(), reader.get()};
}

// Work ahead whose render gives way on transform memory (FillWithdrawn) fails its own flight only: a
// reader that joined it fills for itself. It got the EBUSY, meant for the work ahead.
TEST(TierManager, AReaderThatJoinedWorkAheadThatGaveWayFillsForItself) {
  test::TempDir dir;
  CacheConfig cfg{1 << 20, 0, dir.path(), "lru"};
  TierManager tm(cfg);
  const JoinedFailure got =
      join_a_fill_that_fails(tm, [] { throw FillWithdrawn("transform memory in use; the work ahead gives way"); });
  EXPECT_EQ(got.filler_err, EBUSY);
  EXPECT_EQ(got.reader, "the reader's");
  EXPECT_EQ(load(tm.counters().fill_errors), 0u) << "giving way counted as a failed fill";
}

// Only a withdrawal sends a joined reader to fill for itself: any other error, EBUSY included, is
// the fill's answer and reaches the readers that joined it. The join used to tell the two apart by
// the errno alone.
TEST(TierManager, AJoinedFillThatFailsWithEbusyGivesTheReaderItsError) {
  test::TempDir dir;
  CacheConfig cfg{1 << 20, 0, dir.path(), "lru"};
  TierManager tm(cfg);
  const JoinedFailure got = join_a_fill_that_fails(tm, [] { throw Error(EBUSY, "the source is busy"); });
  EXPECT_EQ(got.filler_err, EBUSY);
  EXPECT_EQ(got.reader, "the source is busy");
  EXPECT_EQ(load(tm.counters().fills), 1u);
  EXPECT_EQ(load(tm.counters().fill_errors), 1u);
}

// A request that comes once a fill has failed starts a fill of its own, even before the failed
// fill's readers have their error: it used to join the dead flight and get an error from a fill
// it never shared (the source may be back by then).
TEST(TierManager, ARequestAfterAFailedFillFillsAgain) {
  test::TempDir dir;
  CacheConfig cfg{1 << 20, 0, dir.path(), "lru"};
  cfg.fill_wait = std::chrono::milliseconds(50);
  TierManager* tm_ptr = nullptr;
  std::string after;
  cfg.after_failed_fill = [&](const CacheKey& k) {
    if (!after.empty()) return;
    after = "(none)";
    try {
      after = str(tm_ptr->get_or_fill(k, Form::raw, [] { return chunk_of("back"); }));
    } catch (const Error& e) {
      after = e.what();
    }
  };
  TierManager tm(cfg);
  tm_ptr = &tm;
  EXPECT_THROW(tm.get_or_fill(key_for("x"), Form::raw, []() -> ChunkRef { throw Error(EIO, "source down"); }), Error);
  EXPECT_EQ(after, "back");
  EXPECT_EQ(load(tm.counters().fills), 2u);
  EXPECT_EQ(str(tm.get_or_fill(key_for("x"), Form::raw, [] { return chunk_of("third"); })), "back");
}

// A last use (a variant's last serve) that joins a fill and gives up still drops the entry: the
// fill it waited for, an earlier serve's, would otherwise keep a variant nobody asks for again.
TEST(TierManager, ALastUseThatTimesOutLeavesNothingBehind) {
  test::TempDir dir;
  CacheConfig cfg{1 << 20, 1 << 20, dir.path(), "lru"};
  cfg.fill_wait = std::chrono::milliseconds(50);
  TierManager tm(cfg);
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  const CacheKey k = key_for("variant");
  auto filler = std::async(std::launch::async, [&] {
    return str(tm.get_or_fill(k, Form::augmented, [&] {
      gate.wait();
      return chunk_of("variant");
    }));
  });
  while (load(tm.counters().fills) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_THROW(tm.get_or_fill(k, Form::augmented, [] { return chunk_of("again"); }, Admission::last()), Error);
  go.set_value();
  EXPECT_EQ(filler.get(), "variant");
  ASSERT_TRUE(tm.flush());
  EXPECT_FALSE(tm.contains(k));
}

// Two opens of one variant can reach the cache out of order: the last serve first (kept nowhere),
// then an earlier serve, whose admission used to keep a variant nobody asks for again (its form
// refuses new entries at its quota, so it stayed until pressure from elsewhere evicted it).
TEST(TierManager, AUseAfterTheLastUseKeepsNothing) {
  test::TempDir dir;
  TierManager tm(CacheConfig{1 << 20, 1 << 20, dir.path(), "lru"});
  const CacheKey k = key_for("variant");
  auto render = [] { return chunk_of("variant"); };
  EXPECT_EQ(str(tm.get_or_fill(k, Form::augmented, render, Admission::last())), "variant");
  EXPECT_EQ(str(tm.get_or_fill(k, Form::augmented, render, Admission{true, true})), "variant");
  ASSERT_TRUE(tm.flush());
  EXPECT_FALSE(tm.contains(k)) << "the late earlier serve kept the variant";
  EXPECT_EQ(load(tm.counters().fills), 2u);
  // Another key is admitted as its caller says.
  const CacheKey other = key_for("other variant");
  tm.get_or_fill(other, Form::augmented, render, Admission{true, false});
  EXPECT_TRUE(tm.ram().contains(other));
}

// What the RAM tier keeps is also written to the SSD tier as a spare copy (the placement keeps it
// in RAM only), so a restart over the same directory starts warm.
TEST(TierManager, WhatRamKeepsIsOnTheSsdForAWarmRestart) {
  test::TempDir dir;
  const Admission ram_only{true, false, false};
  {
    TierManager tm(CacheConfig{1 << 20, 1 << 20, dir.path(), "lru"});
    tm.get_or_fill(
        key_for("x"), Form::raw, [] { return chunk_of("from source"); }, ram_only);
    ASSERT_TRUE(tm.flush());
    EXPECT_EQ(tm.ssd()->spare_stats().entries, 1u);
    EXPECT_EQ(tm.stats(Tier::ssd).entries, 0u);  // not a planned entry: the quotas do not see it
    // An augmented variant gets no spare: it lives for aug_reuse opens, and a restart starts the
    // open counts again, so nothing would read it.
    const CacheKey variant = make_key(KeyFields{"x", FileVersion{10, 1}, Form::augmented, 7, 1, 0, 0});
    tm.get_or_fill(
        variant, Form::augmented, [] { return chunk_of("variant 1"); }, ram_only);
    ASSERT_TRUE(tm.flush());
    EXPECT_TRUE(tm.ram().contains(variant));
    EXPECT_FALSE(tm.ssd()->contains_spare(variant));
    EXPECT_EQ(tm.ssd()->spare_stats().entries, 1u);
  }
  TierManager tm(CacheConfig{1 << 20, 1 << 20, dir.path(), "lru"});
  int fills = 0;
  EXPECT_EQ(str(tm.get_or_fill(
                key_for("x"), Form::raw,
                [&] {
                  fills++;
                  return chunk_of("WRONG");
                },
                ram_only)),
            "from source");
  EXPECT_EQ(fills, 0);
}

// An erase while the key is being filled wins: the filler serves its chunk but keeps nothing,
// in RAM, the recent fills or on the SSD (planned or spare). Before, the fill's admission came
// after the erase, and a sample a re-plan had moved kept a spare copy of the entry it dropped
// (a likely cause of an ASan flake of Daemon.AVariantsInputsDroppedWhileItWaitsForASlotAreFetchedAgain).
TEST(TierManager, AnEraseDuringAFillLeavesNothingBehind) {
  test::TempDir dir;
  TierManager tm(CacheConfig{1 << 20, 1 << 20, dir.path(), "lru"});
  for (const Admission admit : {Admission{true, false, false}, Admission{true, true, false}, Admission::none()}) {
    const CacheKey k = key_for("x");
    EXPECT_EQ(str(tm.get_or_fill(
                  k, Form::raw,
                  [&] {
                    tm.erase(k);  // what a re-plan's move does while a prefetch fetches
                    return chunk_of("from source");
                  },
                  admit)),
              "from source");
    ASSERT_TRUE(tm.flush());
    EXPECT_FALSE(tm.contains(k)) << admit.ram << admit.ssd;
    EXPECT_EQ(tm.ssd()->spare_stats().entries, 0u);
    EXPECT_EQ(tm.stats(Tier::ssd).entries, 0u);
    // The next fill is kept as usual: the erase was for the fill under way only.
    tm.get_or_fill(
        k, Form::raw, [] { return chunk_of("again"); }, admit);
    ASSERT_TRUE(tm.flush());
    EXPECT_EQ(tm.contains(k), admit.ram || admit.ssd || admit.recent);
    tm.erase(k);
  }
}

// A warm restart serves the samples the plan puts on the SSD from their spare copies (what RAM
// held, copied while the SSD had room). A hit on a spare under an SSD admission makes it a
// planned entry, as keep() does: spares sit outside the quotas and go first, so the next planned
// writes pushed them out, and the next epoch fetched them from the source again.
TEST(TierManager, AnSsdAdmittedHitOnASpareCopyMakesItPlanned) {
  test::TempDir dir;
  TierManager tm(CacheConfig{1 << 20, 1 << 20, dir.path(), "lru"});
  const CacheKey k = key_for("x");
  ASSERT_TRUE(tm.ssd()->put_spare_async(k, chunk_of("spare"), Form::raw));
  ASSERT_TRUE(tm.flush());
  ASSERT_TRUE(tm.ssd()->contains_spare(k));
  ASSERT_FALSE(tm.ssd()->contains(k));
  int fills = 0;
  EXPECT_EQ(str(tm.get_or_fill(
                k, Form::raw,
                [&] {
                  fills++;
                  return chunk_of("source");
                },
                Admission{false, true, false})),
            "spare");
  EXPECT_EQ(fills, 0);
  ASSERT_TRUE(tm.flush());
  EXPECT_TRUE(tm.ssd()->contains(k)) << "still a spare copy";
  EXPECT_EQ(str(tm.ssd()->get(k)), "spare");
}

// keep(): a chunk fetched among the recent fills is admitted as its fill would have been, but
// not while a fill of the key is under way (that fill admits as its own caller says).
TEST(TierManager, KeepAdmitsARecentFillAsItsFillWouldHave) {
  test::TempDir dir;
  TierManager tm(CacheConfig{1 << 20, 1 << 20, dir.path(), "lru"});
  const CacheKey in_ram = key_for("ram"), on_ssd = key_for("ssd"), filling = key_for("filling");
  for (const CacheKey& k : {in_ram, on_ssd})
    tm.get_or_fill(k, Form::raw, [] { return chunk_of("head"); }, Admission::none());
  ASSERT_TRUE(tm.contains(in_ram));
  ASSERT_FALSE(tm.in_tier(in_ram));
  tm.keep(in_ram, tm.lookup(in_ram), Form::raw, Admission{true, false, false});
  tm.keep(on_ssd, tm.lookup(on_ssd), Form::raw, Admission{false, true, false});
  ASSERT_TRUE(tm.flush());
  EXPECT_TRUE(tm.ram().contains(in_ram));
  EXPECT_FALSE(tm.ram().has_recent(in_ram));  // moved, not copied
  EXPECT_TRUE(tm.ssd()->contains(on_ssd));
  EXPECT_FALSE(tm.ram().contains(on_ssd));
  EXPECT_TRUE(tm.ram().has_recent(on_ssd));  // at hand for the file's next requests, as before

  // RAM refuses (its raw quota is 0): the chunk stays among the recent fills.
  const CacheKey refused = key_for("refused");
  tm.get_or_fill(refused, Form::raw, [] { return chunk_of("head"); }, Admission::none());
  tm.set_partition({0, 0, 0}, {0, 0, 0});
  tm.keep(refused, tm.lookup(refused), Form::raw, Admission{true, false, false});
  EXPECT_FALSE(tm.ram().contains(refused));
  EXPECT_TRUE(tm.ram().has_recent(refused)) << "a refused keep() lost the recent copy";
  tm.set_partition({1, 1, 1}, {1, 1, 1});

  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  const uint64_t fills = load(tm.counters().fills);
  auto filler = std::async(std::launch::async, [&] {
    return str(tm.get_or_fill(
        filling, Form::raw,
        [&] {
          gate.wait();
          return chunk_of("fill");
        },
        Admission::none()));
  });
  while (load(tm.counters().fills) == fills) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  tm.keep(filling, chunk_of("kept"), Form::raw, Admission{true, true, false});
  go.set_value();
  EXPECT_EQ(filler.get(), "fill");
  ASSERT_TRUE(tm.flush());
  EXPECT_FALSE(tm.in_tier(filling)) << "keep() admitted over a fill under way";
}

// Spare copies use only the room planned entries leave, give it back first, and sit outside the
// per-form quotas.
TEST(SsdTier, SpareCopiesNeverDisplacePlannedEntries) {
  test::TempDir dir;
  TierCounters c;
  const uint64_t entry = 1000 + sizeof(SsdEntryHeader);
  SsdTier ssd(dir.path(), 3 * entry, make_policy("lru"), c);
  ssd.set_form_shares({1, 0, 0});
  auto data = [](int i) { return chunk_of(test::pattern(1000, i)); };
  for (const char* k : {"s1", "s2", "s3"}) ASSERT_TRUE(ssd.put_spare_async(key_for(k), data(1), Form::decoded));
  ASSERT_TRUE(ssd.flush());
  EXPECT_EQ(ssd.spare_stats().entries, 3u);  // the decoded quota is 0: spares are outside it
  ASSERT_TRUE(ssd.put_async(key_for("p1"), data(2), Form::raw));
  ASSERT_TRUE(ssd.flush());
  EXPECT_EQ(ssd.stats().entries, 1u);
  EXPECT_EQ(ssd.spare_stats().entries, 2u);
  EXPECT_FALSE(ssd.contains_spare(key_for("s1")));  // the oldest spare gave way
  EXPECT_TRUE(ssd.contains_spare(key_for("s2")));
  for (const char* k : {"p2", "p3"}) ASSERT_TRUE(ssd.put_async(key_for(k), data(3), Form::raw));
  ASSERT_TRUE(ssd.flush());
  EXPECT_EQ(ssd.stats().entries, 3u);
  EXPECT_EQ(ssd.spare_stats().entries, 0u);
  EXPECT_FALSE(ssd.put_spare_async(key_for("s4"), data(4), Form::raw));  // no room left by planned entries
  ASSERT_TRUE(ssd.flush());
  EXPECT_EQ(ssd.stats().entries, 3u);
  EXPECT_EQ(files_under(dir.path()), 3u);
  EXPECT_TRUE(ssd.get(key_for("p1")));
}

// A spare copy survives a restart as a spare (its own file name), and a planned write of the same
// key replaces it.
TEST(SsdTier, SpareCopiesSurviveARestartAsSpares) {
  test::TempDir dir;
  const uint64_t budget = 1 << 20;
  {
    TierCounters c;
    SsdTier ssd(dir.path(), budget, make_policy("lru"), c);
    ASSERT_TRUE(ssd.put_spare_async(key_for("s"), chunk_of("spare"), Form::raw));
    ASSERT_TRUE(ssd.flush());
    EXPECT_TRUE(std::filesystem::exists(ssd.path_of(key_for("s"), Form::raw, true)));
  }
  TierCounters c;
  SsdTier ssd(dir.path(), budget, make_policy("lru"), c);
  EXPECT_EQ(ssd.spare_stats().entries, 1u);
  EXPECT_EQ(ssd.stats().entries, 0u);
  EXPECT_EQ(str(ssd.get(key_for("s"))), "spare");
  ASSERT_TRUE(ssd.put_async(key_for("s"), chunk_of("spare"), Form::raw));
  ASSERT_TRUE(ssd.flush());
  EXPECT_EQ(ssd.spare_stats().entries, 0u);
  EXPECT_EQ(ssd.stats().entries, 1u);
  EXPECT_EQ(files_under(dir.path()), 1u);
  EXPECT_EQ(str(ssd.get(key_for("s"))), "spare");
}
