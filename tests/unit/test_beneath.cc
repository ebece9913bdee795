// Resolution beneath the source root, both ways (openat2 and the component walk): a symlink in
// any component fails the path, whatever it points to.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/source/beneath.h"
#include "temp_dir.h"

using namespace prepfs;
namespace fs = std::filesystem;

class BeneathTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam() && !Beneath::kernel_resolves()) GTEST_SKIP() << "no openat2 here";
    dir.write("root/d/e/f", "inside");
    dir.write("outside/e/f", "SECRET");
    fs::create_symlink("f", dir / "root/d/e/link");
    root = ::open((dir / "root").c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(root, 0);
  }
  void TearDown() override {
    if (root >= 0) ::close(root);
  }
  std::string read(const Beneath& b, const std::string& rel) {
    int fd = b.open(rel, O_RDONLY);
    char buf[64];
    ssize_t n = ::read(fd, buf, sizeof buf);
    ::close(fd);
    return std::string(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
  }
  int error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.err();
    }
    return 0;
  }
  test::TempDir dir;
  int root = -1;
};

TEST_P(BeneathTest, ResolvesPlainPaths) {
  Beneath b(root, GetParam());
  EXPECT_EQ(read(b, "d/e/f"), "inside");
  EXPECT_TRUE(S_ISDIR(b.lstat("").st_mode));
  EXPECT_TRUE(S_ISDIR(b.lstat("d").st_mode));
  EXPECT_TRUE(S_ISLNK(b.lstat("d/e/link").st_mode));  // described, not followed
  EXPECT_EQ(b.readlink("d/e/link"), "f");
  EXPECT_EQ(error_of([&] { b.open("d/e/missing", O_RDONLY); }), ENOENT);
}

TEST_P(BeneathTest, NeverFollowsASymlinkInAnyComponent) {
  Beneath b(root, GetParam());
  EXPECT_NE(error_of([&] { b.open("d/e/link", O_RDONLY); }), 0);  // the last component
  fs::rename(dir / "root/d", dir / "root/d.old");
  fs::create_symlink(dir / "outside", dir / "root/d");  // a middle component
  for (const char* rel : {"d/e/f", "d/e"}) {
    EXPECT_NE(error_of([&] { b.open(rel, O_RDONLY); }), 0) << rel;
    EXPECT_NE(error_of([&] { b.lstat(rel); }), 0) << rel;
  }
  EXPECT_NE(error_of([&] { b.open("../outside/e/f", O_RDONLY); }), 0);
  EXPECT_TRUE(S_ISLNK(b.lstat("d").st_mode));  // the swapped entry itself is still described
}

// Each way is the one asked for: the walk refuses a "." component that openat2 resolves. The
// constructor's choice was ignored, so "walk" ran openat2 on every kernel that has it.
TEST_P(BeneathTest, ResolvesTheWayItWasAskedTo) {
  Beneath b(root, GetParam());
  if (GetParam())
    EXPECT_EQ(read(b, "d/./e/f"), "inside");
  else
    EXPECT_EQ(error_of([&] { b.open("d/./e/f", O_RDONLY); }), EXDEV);
}

// lstat and readlink resolve the parent beneath the root and hand the leaf to *at() as is: a
// ".." leaf described the root's parent, outside the source. A NUL cut the path short ("d\0x"
// opened "d"). Both are refused now, whichever way the parent is resolved.
TEST_P(BeneathTest, NoLeafNamesWhatIsAboveItsParent) {
  Beneath b(root, GetParam());
  for (const std::string& rel : std::vector<std::string>{"..", "d/..", "d/e/..", ".", "d/", std::string("d\0x", 3)}) {
    EXPECT_EQ(error_of([&] { b.lstat(rel); }), EXDEV) << rel;
    EXPECT_EQ(error_of([&] { b.readlink(rel); }), EXDEV) << rel;
  }
  EXPECT_EQ(error_of([&] { b.open(std::string("d/e/f\0x", 7), O_RDONLY); }), EXDEV);
  EXPECT_TRUE(S_ISDIR(b.lstat("d").st_mode));  // what is beneath still is
}

INSTANTIATE_TEST_SUITE_P(BothWays, BeneathTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "openat2" : "walk"; });
