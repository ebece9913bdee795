// The thin FUSE adaptor's own decisions: the errno a reply carries, what the session answers OPEN
// and OPENDIR with for the kernel it talks to, and (with real mounts) that a stop aborts its own
// connection and never another's.
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <stdexcept>

#include "prepfs/common/error.h"
#include "prepfs/daemon/daemon.h"
#include "prepfs/common/mountinfo.h"
#include "prepfs/fuse/errno_map.h"
#include "prepfs/fuse/fuse_connection.h"
#include "prepfs/fuse/session.h"
#include "temp_dir.h"

namespace prepfs {
namespace {

TEST(ErrnoMap, ErrorsKeepTheirErrnoAndAnythingElseIsEioOrEnomem) {
  EXPECT_EQ(errno_of(Error(ENOENT, "x")), ENOENT);
  EXPECT_EQ(errno_of(Error(EACCES, "x")), EACCES);
  EXPECT_EQ(errno_of(Error(0, "no errno")), EIO) << "a reply of 0 would be success";
  EXPECT_EQ(errno_of(std::bad_alloc()), ENOMEM);
  EXPECT_EQ(errno_of(std::runtime_error("x")), EIO);
}

// A daemon over one file in dir/src, with no SSD tier.
Options daemon_options(const test::TempDir& dir) {
  dir.write("src/x", "x");
  Options o;
  o.source = dir / "src";
  o.mountpoint = dir / "mnt";
  o.ssd_dir = dir / "cache";
  o.ssd_bytes = 0;
  o.log_level = "warn";
  finalize_options(o);
  return o;
}

// OPEN (and OPENDIR) answered ENOSYS means "stop sending these" only to a kernel that supports
// it (Linux 4.20 for files, 5.1 for directories). An older kernel hands ENOSYS to the caller:
// every open of the mount failed there.
TEST(FuseSession, OpensAreSkippedOnlyWhereTheKernelSupportsIt) {
  test::TempDir dir;
  Daemon d(daemon_options(dir));
  SessionConfig wants;
  wants.skip_open = true;
  FuseSession s(d.main_fs(), wants);
  s.kernel_capable(FUSE_CAP_NO_OPEN_SUPPORT | FUSE_CAP_NO_OPENDIR_SUPPORT);
  EXPECT_TRUE(s.skips_open());
  EXPECT_TRUE(s.skips_opendir());
  s.kernel_capable(FUSE_CAP_NO_OPEN_SUPPORT);  // 4.20 to 5.0
  EXPECT_TRUE(s.skips_open());
  EXPECT_FALSE(s.skips_opendir());
  s.kernel_capable(0);
  EXPECT_FALSE(s.skips_open());
  EXPECT_FALSE(s.skips_opendir());

  SessionConfig per_open;  // augmented/: every open picks the next variant
  FuseSession a(d.augmented_fs(), per_open);
  a.kernel_capable(FUSE_CAP_NO_OPEN_SUPPORT | FUSE_CAP_NO_OPENDIR_SUPPORT);
  EXPECT_FALSE(a.skips_open());
  EXPECT_FALSE(a.skips_opendir());
}

std::string contents(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// fusectl stand-in: a connection's number is reused by the next mount once it ends, so a
// directory of the same name may be a successor's. The held connection is neither alive nor
// aborted through it.
TEST(FuseConnection, ASuccessorAtTheSameNumberIsNeitherAliveNorAborted) {
  test::TempDir root;
  root.write("7/abort", "");
  FuseConnection ours = FuseConnection::hold(7, root.path());
  ASSERT_TRUE(ours.held());
  EXPECT_TRUE(ours.alive());

  // Held open while "7" is made again: its inode number cannot come back for the new one (it
  // would on ext4; fusectl's numbers never repeat so).
  const int old_dir = ::open((root / "7").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(old_dir, 0);
  std::filesystem::remove_all(root / "7");  // ours ends ...
  EXPECT_FALSE(ours.alive());
  root.write("7/abort", "");  // ... and the next mount gets number 7
  EXPECT_FALSE(ours.alive()) << "another connection's directory taken for ours";
  EXPECT_TRUE(ours.abort());
  EXPECT_EQ(contents(root / "7/abort"), "") << "the successor was aborted";
  ::close(old_dir);
}

TEST(FuseConnection, WithoutItsEntryNothingIsHeldOrAborted) {
  test::TempDir root;
  FuseConnection none = FuseConnection::hold(9, root.path());
  EXPECT_FALSE(none.held());
  EXPECT_FALSE(none.alive());
  EXPECT_FALSE(none.abort());
}

unsigned minor_of(const std::string& mountpoint) {
  unsigned id = 0;
  for (const MountEntry& m : read_mountinfo())
    if (m.mount_point == mountpoint) id = m.minor;
  return id;
}

// The same with real mounts: a mount that ended is not alive, and aborting through its held
// entry leaves the mount that took its number (the kernel hands out the lowest free one)
// serving.
TEST(FuseConnection, AbortingAnEndedConnectionLeavesItsSuccessorServing) {
  if (access("/dev/fuse", R_OK | W_OK) != 0) GTEST_FAIL() << "needs /dev/fuse (and root, to mount fusectl)";
  test::TempDir dir;
  Daemon d(daemon_options(dir));
  auto session_at = [&](const std::string& mnt) {
    std::filesystem::create_directories(mnt);
    SessionConfig c;
    c.mountpoint = mnt;
    c.skip_open = true;
    auto s = std::make_unique<FuseSession>(d.main_fs(), c);
    s->mount();
    s->start();
    return s;
  };
  auto first = session_at(dir / "first");
  const unsigned number = minor_of(dir / "first");
  ASSERT_NE(number, 0u);
  FuseConnection ended = FuseConnection::hold(number);
  ASSERT_TRUE(ended.alive()) << "no fusectl entry for connection " << number
                             << " (the mount mounts fusectl where it can: as root)";
  first->stop();
  EXPECT_FALSE(ended.alive());

  // Mount until one takes the ended connection's number (at once, unless another test's mount
  // took it first).
  std::vector<std::unique_ptr<FuseSession>> later;
  std::string successor;
  for (int i = 0; i < 8 && successor.empty(); i++) {
    const std::string mnt = dir / ("later" + std::to_string(i));
    later.push_back(session_at(mnt));
    if (minor_of(mnt) == number) successor = mnt;
  }
  ASSERT_FALSE(successor.empty()) << "no later mount took connection " << number;
  EXPECT_FALSE(ended.alive()) << "the successor's entry taken for the ended connection";
  ended.abort();
  struct stat st;
  EXPECT_EQ(::stat((successor + "/raw/x").c_str(), &st), 0) << "the successor was aborted: " << std::strerror(errno);
  for (auto& s : later) s->stop();
}

}  // namespace
}  // namespace prepfs
