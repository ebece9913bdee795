// The thin FUSE adaptor's own decisions, without a mount: the errno a reply carries, and what the
// session answers OPEN and OPENDIR with for the kernel it talks to.
#include <fuse_lowlevel.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <new>
#include <stdexcept>

#include "prepfs/common/error.h"
#include "prepfs/daemon/daemon.h"
#include "prepfs/fuse/errno_map.h"
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

// OPEN (and OPENDIR) answered ENOSYS means "stop sending these" only to a kernel that supports
// it (Linux 4.20 for files, 5.1 for directories). An older kernel hands ENOSYS to the caller:
// every open of the mount failed there.
TEST(FuseSession, OpensAreSkippedOnlyWhereTheKernelSupportsIt) {
  test::TempDir dir;
  dir.write("src/x", "x");
  Options o;
  o.source = dir / "src";
  o.mountpoint = dir / "mnt";
  o.ssd_dir = dir / "cache";
  o.ssd_bytes = 0;
  o.log_level = "warn";
  finalize_options(o);
  Daemon d(o);
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

}  // namespace
}  // namespace prepfs
