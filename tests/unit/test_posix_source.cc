// The directory source's own state: the descriptors it keeps open between reads.
#include "prepfs/source/posix_source.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <string>

#include "prepfs/common/error.h"
#include "temp_dir.h"

namespace prepfs {
namespace {

// This process's descriptor open on path (-1: none).
int descriptor_of(const std::string& path) {
  const std::string want = std::filesystem::canonical(path).string();
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    char target[PATH_MAX];
    const ssize_t n = ::readlink(e.path().c_str(), target, sizeof target - 1);
    if (n > 0 && std::string(target, static_cast<size_t>(n)) == want) return std::stoi(e.path().filename());
  }
  return -1;
}

// A descriptor that fails a read (an NFS handle gone stale, a disk error) is not kept: every later
// read of the file failed through it until 64 other files pushed it out of the cache, or the
// file's version changed.
TEST(PosixSource, AReadThatFailsForgetsTheDescriptorItKept) {
  test::TempDir dir;
  dir.write("src/f", "hello");
  PosixSource src(dir / "src");
  const FileVersion v = version_of(src.stat("f"));
  char buf[5];
  ASSERT_EQ(src.read("f", v, 0, buf, sizeof buf), 5u);
  const int kept = descriptor_of(dir / "src/f");
  ASSERT_GE(kept, 0) << "the source keeps no descriptor: nothing to test";
  // Fault injection: the kept descriptor now names a directory, whose reads fail (EISDIR).
  const int d = ::open((dir / "src").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(d, 0);
  ASSERT_EQ(::dup2(d, kept), kept);
  ::close(d);
  EXPECT_THROW(src.read("f", v, 0, buf, sizeof buf), Error);
  EXPECT_EQ(src.read("f", v, 0, buf, sizeof buf), 5u) << "the failed descriptor stayed in use";
  EXPECT_EQ(std::string(buf, 5), "hello");
}

// A chain of `levels` directories named `name` under dirfd, made and removed through descriptors:
// its paths pass PATH_MAX, which path-based calls (std::filesystem's too) refuse.
void make_chain(int dirfd, const std::string& name, int levels) {
  int cur = ::dup(dirfd);
  for (int i = 0; i < levels; i++) {
    ASSERT_EQ(::mkdirat(cur, name.c_str(), 0755), 0);
    const int next = ::openat(cur, name.c_str(), O_RDONLY | O_DIRECTORY);
    ::close(cur);
    ASSERT_GE(next, 0);
    cur = next;
  }
  const int f = ::openat(cur, "deepest.bin", O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(f, 0);
  ::close(f);
  ::close(cur);
}
void remove_chain(int dirfd, const std::string& name) {
  const int sub = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY);
  if (sub < 0) return;
  remove_chain(sub, name);
  ::unlinkat(sub, "deepest.bin", 0);
  ::close(sub);
  ::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR);
}

// A source as deep as its writer likes: the scan kept a directory open and a path per level,
// without bound, for entries whose paths (PATH_MAX bytes or more) no read could resolve. They are
// left out now, with a warning, and the rest of the tree is listed.
TEST(PosixSource, TheScanLeavesOutWhatIsTooDeepToRead) {
  test::TempDir dir;
  dir.write("src/a.bin", "a");
  const std::string name(200, 'd');
  const int src_fd = ::open((dir / "src").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(src_fd, 0);
  make_chain(src_fd, name, 30);  // 30 x 201 bytes: past PATH_MAX from the 21st level
  PosixSource src(dir / "src");
  size_t longest = 0, entries = 0;
  bool found_a = false;
  src.scan([&](const std::string& rel, const SourceStat&) {
    longest = std::max(longest, rel.size());
    entries++;
    found_a = found_a || rel == "a.bin";
  });
  remove_chain(src_fd, name);
  ::close(src_fd);
  EXPECT_LT(longest, size_t(PATH_MAX));
  EXPECT_EQ(longest, 20 * (name.size() + 1) - 1) << "a level that could be read was left out";
  EXPECT_EQ(entries, 1u + 1u + 20u);  // the root, a.bin, 20 levels
  EXPECT_TRUE(found_a);
}

}  // namespace
}  // namespace prepfs
