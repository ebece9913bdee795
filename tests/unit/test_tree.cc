#include <gtest/gtest.h>

#include <cstring>

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <thread>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/common/error.h"
#include "prepfs/core/data_fs.h"
#include "prepfs/index/tree.h"
#include "prepfs/index/tree_store.h"
#include "prepfs/source/posix_source.h"
#include "read_path.h"
#include "temp_dir.h"

using namespace prepfs;

namespace {

// Sets the mtime of every directory under src to `when` (default: an hour back, with a
// sub-second part). An hour back: a change the case makes next moves it, however coarse the file
// system's clock (where timestamps tick every few ms, before 6.13's multigrain timestamps, a file
// added within the tick of the last change left the directory's mtime and ctime as the scan saw
// them), and the index trusts the directories (a directory changed just before its scan is
// "racy": never reused, see encode_index).
void age_directories(const test::TempDir& d, timespec when = {time(nullptr) - 3600, 123}) {
  const timespec times[2] = {when, when};
  for (const auto& e : std::filesystem::recursive_directory_iterator(d / "src"))
    if (e.is_directory() && !e.is_symlink()) utimensat(AT_FDCWD, e.path().c_str(), times, 0);
  utimensat(AT_FDCWD, (d / "src").c_str(), times, 0);
}

void make_tree(const test::TempDir& d) {
  d.write("src/b/z.txt", "zz");
  d.write("src/b/a.txt", "aaa");
  d.write("src/b/deep/er/f.bin", test::pattern(3'500'000, 9));
  d.write("src/top.txt", "top");
  d.write("src/empty", "");
  std::filesystem::create_directories(d / "src/emptydir");
  symlink("b/a.txt", (d / "src/link").c_str());
  age_directories(d);
}

std::string read_all(DataFs& fs, uint64_t ino, uint64_t size, size_t step) {
  std::string out;
  for (uint64_t off = 0; off < size; off += step)
    for (const Slice& s : fs.read(ino, 0, off, step)) out.append(s.data, s.len);
  return out;
}

}  // namespace

TEST(Tree, ScanLookupAndPaths) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  Tree t = Tree::scan(src);
  EXPECT_EQ(t.size(), 11u);  // root, b, emptydir, empty, link, top.txt, a.txt, z.txt, deep, er, f.bin
  auto b = t.lookup(Tree::kRoot, "b");
  ASSERT_TRUE(b);
  EXPECT_TRUE(t.is_dir(*b));
  auto a = t.lookup(*b, "a.txt");
  ASSERT_TRUE(a);
  EXPECT_EQ(t.path(*a), "b/a.txt");
  EXPECT_EQ(t.node(*a).size, 3u);
  EXPECT_FALSE(t.lookup(*b, "nope"));
  EXPECT_FALSE(t.lookup(*a, "x"));  // files have no children
  auto link = t.lookup(Tree::kRoot, "link");
  ASSERT_TRUE(link);
  EXPECT_EQ(t.symlink_target(*link), "b/a.txt");
  // children of a directory are sorted by name
  const Node& bn = t.node(*b);
  for (uint32_t i = bn.first_child + 1; i < bn.first_child + bn.nchildren; i++) EXPECT_LT(t.name(i - 1), t.name(i));
  EXPECT_EQ(t.file_count(), 5u);
}

TEST(TreeStore, ReusedWhenUnchangedRescannedWhenADirectoryChanges) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  std::string idx = d / "index.bin";
  TreeLoad first = load_or_scan_tree(src, idx);
  EXPECT_FALSE(first.from_index);
  TreeLoad second = load_or_scan_tree(src, idx);
  EXPECT_TRUE(second.from_index);
  EXPECT_EQ(second.tree.size(), first.tree.size());
  EXPECT_EQ(second.tree.path(second.tree.size() - 1), first.tree.path(first.tree.size() - 1));

  d.write("src/b/deep/new.txt", "new");  // changes deep/'s mtime
  TreeLoad third = load_or_scan_tree(src, idx);
  EXPECT_FALSE(third.from_index);
  EXPECT_EQ(third.tree.size(), first.tree.size() + 1);
}

// The index is saved after the scan (on a lazy first mount, once every header is read). A file
// added in between is not in the tree; the index used to take the directory's fingerprint at
// the save, so the next mount reused it and never showed the file, until the directory changed
// again.
TEST(TreeStore, AFileAddedBetweenTheScanAndTheSaveIsFoundNextMount) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  const std::string idx = d / "index.bin";
  Tree scanned = Tree::scan(src);
  d.write("src/b/late.txt", "late");
  save_tree(scanned, src, idx);
  EXPECT_FALSE(load_tree(src, idx)) << "reused an index that misses a file of its directory";
  age_directories(d);  // so that the rescan's index is trusted: b/ changed just now
  TreeLoad next = load_or_scan_tree(src, idx);
  EXPECT_FALSE(next.from_index);
  EXPECT_TRUE(next.tree.lookup(*next.tree.lookup(Tree::kRoot, "b"), "late.txt"));
  EXPECT_TRUE(load_or_scan_tree(src, idx).from_index);  // and from then on, reused as usual
}

// A directory the scan could not list whole (here one it may not open; on NFS, an EIO) is in the
// tree empty, and its fingerprint used to match at the next mount: the index was reused and its
// files stayed missing until the directory changed. It is listed again now.
TEST(TreeStore, ADirectoryTheScanCouldNotListIsListedAgainNextMount) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: the scan runs as another user on one thread";
  test::TempDir d;
  make_tree(d);
  d.write("src/locked/inside.txt", "inside");
  age_directories(d);
  ::chmod(d.path().c_str(), 0755);
  ::chmod((d / "src").c_str(), 0755);
  ::chmod((d / "src/locked").c_str(), 0700);  // root's: another user may not open it
  PosixSource src(d / "src");
  const std::string idx = d / "index.bin";
  // The first scan runs as nobody on a thread of its own (setfsuid is per thread, and drops the
  // capabilities that would let root through); the directory does not change afterwards.
  std::optional<Tree> first;
  std::thread([&] {
    ::setfsuid(65534);
    first.emplace(Tree::scan(src));
    ::setfsuid(0);
  }).join();
  ASSERT_TRUE(first);
  const auto locked = first->lookup(Tree::kRoot, "locked");
  ASSERT_TRUE(locked);
  ASSERT_FALSE(first->lookup(*locked, "inside.txt")) << "the scan could open the directory after all";
  save_tree(*first, src, idx);  // as the mount does, once its headers are read
  PosixSource again(d / "src");  // the next mount, as root
  TreeLoad next = load_or_scan_tree(again, idx);
  EXPECT_FALSE(next.from_index) << "reused an index that misses the files of a directory it could not list";
  EXPECT_TRUE(next.tree.lookup(*next.tree.lookup(Tree::kRoot, "locked"), "inside.txt"));
  EXPECT_TRUE(load_or_scan_tree(again, idx).from_index);  // and from then on, reused as usual
}

// A directory's fingerprint cannot show a file added after its listing within the same
// timestamp tick: mtime and ctime stay as the scan saw them, and the next mount would reuse an
// index without the file until the directory changed again. A directory whose mtime is that
// close to the scan's start is therefore never trusted; the race itself needs a coarse clock
// (kernels before 6.13) and luck, so the cases check the rule.
TEST(TreeStore, ADirectoryChangedJustBeforeItsScanIsListedAgainNextMount) {
  test::TempDir d;
  make_tree(d);
  d.write("src/b/fresh.txt", "fresh");  // b/ changes now, just before the scan
  PosixSource src(d / "src");
  const std::string idx = d / "index.bin";
  save_tree(Tree::scan(src), src, idx);
  EXPECT_FALSE(load_tree(src, idx)) << "trusted a directory that changed just before its scan";
  age_directories(d);  // b/ an hour old by the next scan: trusted from then on
  const TreeLoad rescanned = load_or_scan_tree(src, idx);
  EXPECT_FALSE(rescanned.from_index);
  // Still a restart: the planner weighs refilling what the last mount cached (Planner::
  // plan_with_complete_index), rescan or not.
  EXPECT_TRUE(rescanned.restarted);
  const TreeLoad reused = load_or_scan_tree(src, idx);
  EXPECT_TRUE(reused.from_index);
  EXPECT_TRUE(reused.restarted);
}

// The window is 100 ms where timestamps have a sub-second part, 2 s where they are whole
// seconds (a file system with 1 s or FAT's 2 s timestamps, whose tick is that long).
TEST(TreeStore, TheRacyWindowIsATickOfTheDirectorysTimestamps) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  const std::string idx = d / "index.bin";
  age_directories(d, {time(nullptr) - 1, 500'000'000});  // 0.5 to 1.5 s before the scan, fine-grained
  save_tree(Tree::scan(src), src, idx);
  EXPECT_TRUE(load_tree(src, idx)) << "a directory changed over 100 ms before a fine-grained scan is trusted";
  // The last second, whole: over 1 s back, so only the whole-second window can flag it. Early
  // in a second, so the scan starts well within its 2.1 s (0.8 s to spare).
  timespec now{};
  while (clock_gettime(CLOCK_REALTIME, &now) == 0 && now.tv_nsec > 200'000'000) usleep(50'000);
  age_directories(d, {now.tv_sec - 1, 0});
  save_tree(Tree::scan(src), src, idx);
  EXPECT_FALSE(load_tree(src, idx)) << "a whole-second mtime within 2 s of the scan must not be trusted";
  age_directories(d, {time(nullptr) - 5, 0});
  save_tree(Tree::scan(src), src, idx);
  EXPECT_TRUE(load_tree(src, idx));
}

TEST(TreeStore, CorruptIndexIsRebuilt) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  std::string idx = d / "index.bin";
  EXPECT_FALSE(load_or_scan_tree(src, idx).restarted) << "no index yet: a first mount";
  {
    std::fstream f(idx, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x42');
  }
  EXPECT_FALSE(load_tree(src, idx));
  EXPECT_FALSE(load_or_scan_tree(src, idx).from_index);
}

// A damaged index file whose header is intact but whose size is not (extended, sparse, to
// 4 TiB): the mount rescans. Reading it used to allocate its whole size first, which failed the
// mount with bad_alloc (or, short of that, zero-filled memory up to the OOM killer).
TEST(TreeStore, AnIndexFileLargerThanItsHeaderSaysIsRebuiltWithoutReadingIt) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  std::string idx = d / "index.bin";
  load_or_scan_tree(src, idx);
  ASSERT_EQ(::truncate(idx.c_str(), off_t(1) << 42), 0) << std::strerror(errno);
  EXPECT_FALSE(load_tree(src, idx));
  EXPECT_FALSE(load_or_scan_tree(src, idx).from_index);
  EXPECT_TRUE(load_or_scan_tree(src, idx).from_index) << "the rescan saved a good index";
}

TEST(DataFs, ReadsEveryByteThroughTheCacheWithoutFuse) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  TierManager cache(CacheConfig{64 << 20, 64 << 20, d / "ssd", "lru"});
  Tree tree = Tree::scan(src);
  test::ReadPath rp(src, tree, cache);
  auto owned_fs = rp.data_fs(tree, src, DataFsConfig{-1, false});
  DataFs& fs = *owned_fs;
  Attr raw = fs.lookup(DataFs::kRootIno, "raw");
  Attr b = fs.lookup(raw.ino, "b");
  Attr f = fs.lookup(fs.lookup(fs.lookup(b.ino, "deep").ino, "er").ino, "f.bin");
  EXPECT_EQ(f.size, 3'500'000u);
  std::string expect = test::pattern(3'500'000, 9);
  EXPECT_EQ(read_all(fs, f.ino, f.size, 131072), expect);
  uint64_t source_bytes = load(src.counters().bytes);
  EXPECT_EQ(source_bytes, 3'500'000u);
  EXPECT_EQ(read_all(fs, f.ino, f.size, 100'000), expect);  // unaligned, all hits
  EXPECT_EQ(load(src.counters().bytes), source_bytes);
  EXPECT_TRUE(fs.read(f.ino, 0, f.size, 10).empty());  // at EOF
  EXPECT_THROW(fs.lookup(b.ino, "missing"), Error);
  EXPECT_EQ(fs.readlink(fs.lookup(raw.ino, "link").ino), "b/a.txt");
  std::vector<std::string> names;
  fs.readdir(b.ino, 0, [&](std::string_view n, const Attr&, uint64_t) {
    names.emplace_back(n);
    return true;
  });
  EXPECT_EQ(names, (std::vector<std::string>{".", "..", "a.txt", "deep", "z.txt"}));
}

TEST(DataFs, ChangedSourceFileIsRevalidatedNotServedStale) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  TierManager cache(CacheConfig{64 << 20, 0, d / "ssd", "lru"});
  DataFsConfig cfg;
  cfg.metadata_ttl = 0;  // revalidate on every lookup
  cfg.image_views = false;
  Tree tree = Tree::scan(src);
  test::ReadPath rp(src, tree, cache);
  auto owned_fs = rp.data_fs(tree, src, cfg);
  DataFs& fs = *owned_fs;
  Attr raw = fs.lookup(DataFs::kRootIno, "raw");
  Attr top = fs.lookup(raw.ino, "top.txt");
  EXPECT_EQ(read_all(fs, top.ino, top.size, 4096), "top");
  d.write("src/top.txt", "a longer new version");
  struct timespec times[2] = {{0, UTIME_OMIT}, {1'000'000'000, 0}};
  utimensat(AT_FDCWD, (d / "src/top.txt").c_str(), times, 0);
  Attr again = fs.lookup(raw.ino, "top.txt");
  EXPECT_EQ(again.size, 20u);
  EXPECT_EQ(read_all(fs, again.ino, again.size, 4096), "a longer new version");
  std::vector<uint64_t> invalidated = rp.invalidations.wait(std::chrono::milliseconds(0));
  EXPECT_EQ(invalidated, std::vector<uint64_t>{top.ino});
}

TEST(DataFs, FileChangedBehindAnImmutableIndexGivesEioNotMixedBytes) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  TierManager cache(CacheConfig{64 << 20, 0, d / "ssd", "lru"});
  Tree tree = Tree::scan(src);
  test::ReadPath rp(src, tree, cache);
  auto owned_fs = rp.data_fs(tree, src, DataFsConfig{-1, false});
  DataFs& fs = *owned_fs;
  Attr top = fs.lookup(fs.lookup(DataFs::kRootIno, "raw").ino, "top.txt");
  d.write("src/top.txt", "changed!");
  try {
    fs.read(top.ino, 0, 0, 4096);
    FAIL() << "served a file whose version changed";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EIO);
  }
}

TEST(TreeStore, RescanReadsOnlyTheHeadersOfChangedFiles) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  std::string idx = d / "index.bin";
  load_or_scan_tree(src, idx);
  uint64_t probes = load(src.counters().reads);
  EXPECT_EQ(probes, 1u);                         // f.bin: the other files are too short to be JPEGs, nothing to read
  d.write("src/b/z.txt", "changed and longer");  // a new version of a known file
  d.write("src/b/new.txt", "a new file");        // changes b/'s fingerprint: a rescan
  TreeLoad again = load_or_scan_tree(src, idx);
  EXPECT_FALSE(again.from_index);
  EXPECT_EQ(load(src.counters().reads) - probes, 2u);  // z.txt (new version) and new.txt only
  EXPECT_TRUE(again.tree.probed());
}

TEST(Tree, AVersionIsNeverReadHalfUpdated) {
  test::TempDir d;
  d.write("src/f", "x");
  PosixSource src(d / "src");
  Tree tree = Tree::scan(src);
  const uint32_t f = *tree.lookup(Tree::kRoot, "f");
  const FileVersion a{1, 1}, b{2, 2};
  tree.set_version(f, a);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> torn{0}, reads{0};
  std::thread writer([&] {
    for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); i++) tree.set_version(f, i % 2 ? a : b);
  });
  std::thread reader([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      FileVersion v = tree.version(f);
      if (!(v.size == a.size && v.mtime_ns == a.mtime_ns) && !(v.size == b.size && v.mtime_ns == b.mtime_ns)) torn++;
      reads++;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  writer.join();
  reader.join();
  EXPECT_EQ(torn.load(), 0u) << "of " << reads.load() << " reads";
}

// A header read from version A that is recorded after a revalidation installed version B used to
// write A's whole state back: the tree returned to A (its mode too), or B got A's dimensions.
TEST(Tree, DimensionsReadFromAnOlderVersionLeaveTheNewOneAlone) {
  test::TempDir d;
  d.write("src/f", "x");
  PosixSource src(d / "src");
  Tree tree = Tree::scan(src);
  tree.set_all_dims(std::vector<ImageDims>(tree.size(), ImageDims::unprobed()));
  const uint32_t f = *tree.lookup(Tree::kRoot, "f");
  const FileVersion a = tree.version(f), b{a.size + 1, a.mtime_ns + 1, a.identity + 1};
  const Tree::FileState revalidated{b, {32, 24}, S_IFREG | 0600, tree.owner(f)};
  tree.set_file_state(f, revalidated);  // while A's header was being read
  tree.set_dims(f, a, {64, 48});        // A's header, recorded late
  const Tree::FileState now = tree.file_state(f);
  EXPECT_EQ(now.version, b) << "the revalidation was undone";
  EXPECT_EQ(now.dims, (ImageDims{32, 24})) << "the new version got the old one's dimensions";
  EXPECT_EQ(now.mode & 07777, 0600u);
  EXPECT_EQ(tree.image_count(), 1u);
  tree.set_dims(f, b, {0, 0});  // its own version's header is recorded
  EXPECT_EQ(tree.dims(f), (ImageDims{0, 0}));
  EXPECT_EQ(tree.image_count(), 0u);
}

TEST(DataFs, AFileReplacedWithTheSameSizeAndMtimeIsNotServed) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  TierManager cache(CacheConfig{64 << 20, 0, d / "ssd", "lru"});
  Tree tree = Tree::scan(src);
  test::ReadPath rp(src, tree, cache);
  auto owned_fs = rp.data_fs(tree, src, DataFsConfig{-1, false});
  DataFs& fs = *owned_fs;
  struct stat before;
  ASSERT_EQ(::stat((d / "src/top.txt").c_str(), &before), 0);
  // Another file renamed over it, its size and mtime forged to the indexed ones.
  d.write("src/forged", "TOP");
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, (d / "src/forged").c_str(), times, 0), 0);
  ASSERT_EQ(::rename((d / "src/forged").c_str(), (d / "src/top.txt").c_str()), 0);
  Attr top = fs.lookup(fs.lookup(DataFs::kRootIno, "raw").ino, "top.txt");
  try {
    auto slices = fs.read(top.ino, 0, 0, 4096);
    FAIL() << "served a replaced file: " << std::string(slices.at(0).data, slices.at(0).len);
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EIO);
  }
}

TEST(TreeStore, KeepsVersionsAndOwners) {
  test::TempDir d;
  make_tree(d);
  ASSERT_EQ(chown((d / "src/b/a.txt").c_str(), 23456, 23457), 0);
  PosixSource src(d / "src");
  std::string idx = d / "index.bin";
  TreeLoad first = load_or_scan_tree(src, idx);
  TreeLoad second = load_or_scan_tree(src, idx);
  ASSERT_TRUE(second.from_index);
  for (uint32_t id = 0; id < first.tree.size(); id++) {
    EXPECT_EQ(second.tree.version(id), first.tree.version(id)) << first.tree.path(id);
    EXPECT_EQ(second.tree.owner(id), first.tree.owner(id)) << first.tree.path(id);
  }
  const uint32_t a = *second.tree.lookup(*second.tree.lookup(Tree::kRoot, "b"), "a.txt");
  EXPECT_EQ(second.tree.owner(a), (Owner{23456, 23457}));
  EXPECT_EQ(second.tree.owner(Tree::kRoot), (Owner{getuid(), getgid()}));
  EXPECT_NE(second.tree.version(a).identity, 0u);
}

TEST(DataFs, RevalidationRefreshesModeAndOwner) {
  test::TempDir d;
  make_tree(d);
  PosixSource src(d / "src");
  TierManager cache(CacheConfig{64 << 20, 0, d / "ssd", "lru"});
  Tree tree = Tree::scan(src);
  test::ReadPath rp(src, tree, cache);
  DataFsConfig cfg;
  cfg.metadata_ttl = 0;
  cfg.image_views = false;
  auto fs = rp.data_fs(tree, src, cfg);
  Attr raw = fs->lookup(DataFs::kRootIno, "raw");
  ASSERT_EQ(chown((d / "src/top.txt").c_str(), 23456, 23457), 0);
  ASSERT_EQ(chmod((d / "src/top.txt").c_str(), 0600), 0);
  Attr top = fs->lookup(raw.ino, "top.txt");
  EXPECT_EQ(top.uid, 23456u);
  EXPECT_EQ(top.gid, 23457u);
  EXPECT_EQ(top.mode, S_IFREG | 0600u);
  EXPECT_EQ(fs->lookup(raw.ino, "b").uid, getuid());  // untouched entries keep theirs
}
