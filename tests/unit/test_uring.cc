// The io_uring path's error handling: a failed submission must not leave the kernel holding the
// caller's buffer. A pipe makes a read that stays in flight until the test writes to it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/io/uring.h"
#include "temp_dir.h"

using namespace prepfs;

TEST(Uring, FailedSubmitLeavesNothingInFlight) {
  if (!io::uring_active()) GTEST_SKIP() << "io_uring unavailable here";
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::vector<char> buf(2u << 20, 'x');  // four segments, all in flight at once, all blocked on the pipe
  io::testing::fail_next_submit(EIO);    // the kernel takes the reads, then the submit "fails"
  try {
    io::pread_full(p[0], buf.data(), buf.size(), 0);
    FAIL() << "the injected submit failure was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), EIO);
  }
  // pread_full has returned: the kernel must be done with buf. Bytes written now go nowhere; one
  // write per segment, so that each read still in flight (the bug) would complete.
  std::string data(4096, 'y');
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(write(p[1], data.data(), data.size()), ssize_t(data.size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  size_t changed = 0;
  for (char c : buf) changed += c != 'x';
  EXPECT_EQ(changed, 0u) << "the kernel wrote into the buffer after the error";

  // The ring is still usable and reaps nothing stale (a stale completion would index past the
  // one-segment result vector: ASan reports that).
  test::TempDir dir;
  dir.write("f", std::string(1000, 'z'));
  int fd = ::open((dir / "f").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<char> small(1000);
  EXPECT_EQ(io::pread_full(fd, small.data(), small.size(), 0), 1000u);
  EXPECT_EQ(std::string(small.begin(), small.end()), std::string(1000, 'z'));
  ::close(fd);
  ::close(p[0]);
  ::close(p[1]);
}
