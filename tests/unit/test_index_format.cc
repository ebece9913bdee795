// The persisted index's bytes (index/index_format.h). The checksum only catches accidents: anyone
// who can write ssd_dir can recompute it, so every test here reseals the bytes it damages and
// expects decode_index to refuse them with Error(EIO), never to crash, loop or allocate.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/index/index_format.h"
#include "prepfs/index/tree_store.h"
#include "temp_dir.h"

using namespace prepfs;

namespace {

// root(0): README(1) empty/(2) latest->train(3) train/(4); train: cat/(5) dog/(6);
// cat: 1.jpg(7) 2.jpg(8); dog: a.jpg(9). Ids are breadth-first, children sorted by name.
class SmallSource : public Source {
 public:
  std::string identity() const override { return "mem:small"; }
  void scan(const Visitor& visit) override {
    const SourceStat dir{S_IFDIR | 0755, 0, 1, {}};
    visit("", dir);
    visit("train", dir);
    visit("train/cat", dir);
    visit("train/cat/1.jpg", {S_IFREG | 0644, 100, 2, {}});
    visit("train/cat/2.jpg", {S_IFREG | 0644, 200, 3, {}});
    visit("train/dog", dir);
    visit("train/dog/a.jpg", {S_IFREG | 0644, 300, 4, {}});
    visit("empty", dir);
    visit("README", {S_IFREG | 0644, 12, 5, {}});
    visit("latest", {S_IFLNK | 0777, 5, 6, "train"});
  }
  // The directories as scanned (the index records a fingerprint only for one unchanged since).
  SourceStat stat(const std::string& rel) override {
    for (const char* d : {"", "train", "train/cat", "train/dog", "empty"})
      if (rel == d) return SourceStat{S_IFDIR | 0755, 0, 1, {}};
    throw Error(ENOENT, "not here");
  }
  std::optional<DirFingerprint> dir_fingerprint(const std::string& rel) override {
    if (gone_ && rel == *gone_) return std::nullopt;
    return DirFingerprint{7, 8, 9 + rel.size()};
  }
  size_t read(const std::string&, const FileVersion&, uint64_t, void*, size_t) override { return 0; }
  std::optional<std::string> gone_;
};

constexpr uint32_t kEmpty = 2, kLatest = 3, kTrain = 4, kCat = 5, kDog = 6, kCat1 = 7, kCat2 = 8, kDogA = 9;

// An encoded index and the means to damage it as an attacker would: fields rewritten, then the
// checksum recomputed.
struct Bytes {
  std::string data;

  IndexHeader header() const {
    IndexHeader h;
    std::memcpy(&h, data.data(), sizeof h);
    return h;
  }
  void set_header(const IndexHeader& h) { std::memcpy(data.data(), &h, sizeof h); }
  size_t node_at(uint32_t id) const { return sizeof(IndexHeader) + id * sizeof(Node); }
  size_t arena_at() const { return node_at(static_cast<uint32_t>(header().node_count)); }
  size_t dirs_at() const { return arena_at() + header().arena_size; }
  size_t dims_at(uint32_t id) const {
    return dirs_at() + header().dir_count * sizeof(DirRecord) + id * sizeof(ImageDims);
  }

  Node node(uint32_t id) const {
    Node n;
    std::memcpy(&n, data.data() + node_at(id), sizeof n);
    return n;
  }
  template <class F>
  void edit_node(uint32_t id, F f) {
    Node n = node(id);
    f(n);
    std::memcpy(data.data() + node_at(id), &n, sizeof n);
  }
  void set_dims(uint32_t id, ImageDims d) { std::memcpy(data.data() + dims_at(id), &d, sizeof d); }
  DirRecord dir(size_t i) const {
    DirRecord r;
    std::memcpy(&r, data.data() + dirs_at() + i * sizeof r, sizeof r);
    return r;
  }
  void set_dir(size_t i, const DirRecord& r) { std::memcpy(data.data() + dirs_at() + i * sizeof r, &r, sizeof r); }

  // The checksum anyone can recompute.
  std::string sealed() const {
    std::string out = data;
    uint64_t sum = XXH3_64bits(out.data(), out.size() - 8);
    std::memcpy(out.data() + out.size() - 8, &sum, 8);
    return out;
  }
};

Bytes small_index(SmallSource& src) {
  Tree t = Tree::scan(src);
  std::vector<ImageDims> dims(t.size());
  dims[kCat1] = {640, 480};
  dims[kDogA] = {65535, 1};
  t.set_all_dims(std::move(dims));
  return Bytes{encode_index(t, src)};
}

// decode_index must refuse b with EIO and say why (the log line an operator reads). `reason`: a
// part of that line, when the damage could also trip another check: the case is then about this
// one.
void expect_refused(SmallSource& src, const Bytes& b, const char* why, const char* reason = nullptr) {
  try {
    decode_index(b.sealed(), index_source_hash(src));
    ADD_FAILURE() << "accepted an index with " << why;
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EIO) << why;
    EXPECT_STRNE(e.what(), "") << why;
    if (reason) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << why << ": " << e.what();
    }
  }
}

}  // namespace

TEST(IndexFormat, RoundTripsATree) {
  SmallSource src;
  Bytes b = small_index(src);
  StoredIndex got = decode_index(b.data, index_source_hash(src));
  ASSERT_EQ(got.tree.size(), 10u);
  EXPECT_EQ(got.tree.path(kCat2), "train/cat/2.jpg");
  EXPECT_EQ(got.tree.symlink_target(kLatest), "train");
  EXPECT_EQ(got.tree.dims(kDogA).width, 65535u);
  EXPECT_EQ(*got.tree.lookup(kTrain, "dog"), kDog);
  ASSERT_EQ(got.dirs.size(), 5u);  // root, empty, train, cat, dog
  EXPECT_EQ(got.dirs[3].node, kCat);
  EXPECT_EQ(got.dirs[3].fp, (DirFingerprint{7, 8, 9 + 9}));
}

TEST(IndexFormat, RefusesAnotherSourceOrADamagedFile) {
  SmallSource src;
  Bytes b = small_index(src);
  EXPECT_THROW(decode_index(b.data, index_source_hash(src) + 1), Error);
  std::string flipped = b.data;
  flipped[60] ^= 1;  // without a resealed checksum
  EXPECT_THROW(decode_index(flipped, index_source_hash(src)), Error);
  EXPECT_THROW(decode_index(b.data.substr(0, 40), index_source_hash(src)), Error);
}

// The defect issue 11 names: a parent cycle made Tree::path() loop forever.
TEST(IndexFormat, RefusesAParentCycle) {
  SmallSource src;
  Bytes b = small_index(src);
  b.edit_node(kTrain, [](Node& n) { n.parent = kCat; });  // train -> cat -> train
  expect_refused(src, b, "a parent cycle");
  Bytes self = small_index(src);
  self.edit_node(kDog, [](Node& n) { n.parent = kDog; });
  expect_refused(src, self, "a node that is its own parent");
}

TEST(IndexFormat, RefusesIdsOutsideTheTree) {
  SmallSource src;
  Bytes parent = small_index(src);
  parent.edit_node(kDogA, [](Node& n) { n.parent = 1000; });
  expect_refused(src, parent, "a parent beyond the last node");
  Bytes children = small_index(src);
  children.edit_node(kDog, [](Node& n) { n.nchildren = 100; });
  expect_refused(src, children, "children beyond the last node");
  Bytes wrap = small_index(src);
  wrap.edit_node(kDog, [](Node& n) {
    n.first_child = 0xFFFFFFF0u;
    n.nchildren = 0x20;  // first_child + nchildren wraps around in 32 bits
  });
  expect_refused(src, wrap, "a children range that wraps around");
}

TEST(IndexFormat, RefusesNamesAndTargetsOutsideTheArena) {
  SmallSource src;
  Bytes name = small_index(src);
  name.edit_node(kCat1, [&](Node& n) { n.name_off = static_cast<uint32_t>(name.header().arena_size) - 1; });
  expect_refused(src, name, "a name past the end of the arena");
  Bytes far = small_index(src);
  far.edit_node(kCat1, [](Node& n) { n.name_off = 0xFFFFFFFFu; });
  expect_refused(src, far, "a name offset far outside the arena");
  Bytes target = small_index(src);
  target.edit_node(kLatest, [](Node& n) { n.size = 1u << 20; });
  expect_refused(src, target, "a symlink target past the end of the arena");
}

TEST(IndexFormat, RefusesNamesThatAreNotOnePathComponent) {
  SmallSource src;
  // Each where the names' order still holds, so only the component check can refuse it: dot
  // names as cat's first child (before "2.jpg"), the others as "empty" (between "README" and
  // "latest"). Each name has 5 bytes of arena to be written into.
  for (const std::string& bad : {std::string(".."), std::string("."), std::string("a/b"), std::string("a\0b", 3)}) {
    SCOPED_TRACE(bad);
    Bytes b = small_index(src);
    const uint32_t at = bad[0] == '.' ? kCat1 : kEmpty;
    Node n = b.node(at);
    std::memcpy(b.data.data() + b.arena_at() + n.name_off, bad.data(), bad.size());
    b.edit_node(at, [&](Node& m) { m.name_len = static_cast<uint16_t>(bad.size()); });
    expect_refused(src, b, "an unsafe name", "not a single path component");
  }
  Bytes empty = small_index(src);
  empty.edit_node(kCat1, [](Node& n) { n.name_len = 0; });
  expect_refused(src, empty, "an empty name");
}

TEST(IndexFormat, RefusesChildrenThatDisagreeWithTheirParent) {
  SmallSource src;
  Bytes other = small_index(src);
  other.edit_node(kCat2, [](Node& n) { n.parent = kDog; });  // listed under cat, claims dog
  expect_refused(src, other, "a child whose parent does not list it");
  Bytes unsorted = small_index(src);
  Node one = unsorted.node(kCat1), two = unsorted.node(kCat2);
  unsorted.edit_node(kCat1, [&](Node& n) { n.name_off = two.name_off; });
  unsorted.edit_node(kCat2, [&](Node& n) { n.name_off = one.name_off; });
  expect_refused(src, unsorted, "children out of name order (lookup is a binary search)");
  Bytes file_parent = small_index(src);
  file_parent.edit_node(1, [](Node& n) {  // README, a file, claims children
    n.first_child = kCat1;
    n.nchildren = 1;
  });
  expect_refused(src, file_parent, "a file with children");
  Bytes root = small_index(src);
  root.edit_node(0, [](Node& n) { n.mode = S_IFREG | 0644; });
  expect_refused(src, root, "a root that is not a directory");
  Bytes fifo = small_index(src);
  fifo.edit_node(1, [](Node& n) { n.mode = S_IFIFO | 0644; });
  expect_refused(src, fifo, "a node type the scan never records");
}

TEST(IndexFormat, RefusesBadDirectoryRecordsAndDims) {
  SmallSource src;
  // The last record, so the records still rise: only the directory check can refuse it.
  Bytes file_dir = small_index(src);
  const size_t last = file_dir.header().dir_count - 1;
  DirRecord r = file_dir.dir(last);
  ASSERT_LT(r.node, kCat1);
  r.node = kCat1;
  file_dir.set_dir(last, r);
  expect_refused(src, file_dir, "a directory record naming a file");
  Bytes repeated = small_index(src);
  repeated.set_dir(2, repeated.dir(1));
  expect_refused(src, repeated, "a directory recorded twice");
  Bytes missing = small_index(src);
  IndexHeader h = missing.header();
  missing.data.erase(missing.dirs_at() + (h.dir_count - 1) * sizeof(DirRecord), sizeof(DirRecord));
  h.dir_count--;
  missing.set_header(h);
  expect_refused(src, missing, "a directory without a record (it would be reused unchecked)");
  Bytes dims_dir = small_index(src);
  dims_dir.set_dims(kDog, {10, 10});
  expect_refused(src, dims_dir, "image dimensions on a directory");
  Bytes half = small_index(src);
  half.set_dims(kCat2, {10, 0});
  expect_refused(src, half, "an image with one dimension");
  Bytes huge = small_index(src);
  huge.set_dims(kCat2, {65536, 1});
  expect_refused(src, huge, "dimensions no JPEG header can state");
}

TEST(IndexFormat, RefusesCountsThatOverflowTheSizeArithmetic) {
  SmallSource src;
  Bytes b = small_index(src);
  IndexHeader h = b.header();
  // 2^61 nodes of 40 + 8 bytes each add 0 modulo 2^64: the file size would still "match".
  const uint64_t real_nodes = h.node_count;
  h.node_count = uint64_t{1} << 61;
  h.arena_size += real_nodes * (sizeof(Node) + sizeof(ImageDims));
  b.set_header(h);
  expect_refused(src, b, "a node count that overflows");
  Bytes arena = small_index(src);
  IndexHeader a = arena.header();
  a.arena_size = ~uint64_t{0};
  arena.set_header(a);
  expect_refused(src, arena, "an arena larger than the file");
}

// Through the file, as a mount sees it: the damaged index is set aside (one log line) and the
// tree rescanned, so the mount still serves the source.
TEST(TreeStoreFile, ACycleInTheFileMeansARescan) {
  test::TempDir d;
  SmallSource src;
  std::string path = d / "index.bin";
  Bytes b = small_index(src);
  b.edit_node(kTrain, [](Node& n) { n.parent = kCat; });
  d.write("index.bin", b.sealed());
  EXPECT_FALSE(load_tree(src, path));
  TreeLoad again = load_or_scan_tree(src, path);
  EXPECT_FALSE(again.from_index);
  EXPECT_EQ(again.tree.path(kCat2), "train/cat/2.jpg");
  EXPECT_TRUE(load_or_scan_tree(src, path).from_index);  // the rescan rewrote a good index
}

// A save that fails (here its rename: a directory stands where the index goes) leaves no
// temporary file behind, which on a full disk would hold the space that is short.
TEST(TreeStoreFile, AFailedSaveLeavesNoTemporaryFile) {
  test::TempDir d;
  SmallSource src;
  TreeLoad scanned = load_or_scan_tree(src, d / "elsewhere.bin");
  ASSERT_EQ(::mkdir((d / "index.bin").c_str(), 0700), 0);
  EXPECT_THROW(save_tree(scanned.tree, src, d / "index.bin"), Error);
  EXPECT_NE(::access((d / "index.bin.tmp").c_str(), F_OK), 0) << "the temporary file stayed";
}
