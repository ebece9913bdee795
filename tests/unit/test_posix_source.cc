// The directory source's own state: the descriptors it keeps open between reads.
#include "prepfs/source/posix_source.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

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

}  // namespace
}  // namespace prepfs
