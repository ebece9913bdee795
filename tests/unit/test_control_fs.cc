// ControlFs: snapshots per open, and the write path of command files (everything else EROFS).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <string>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/core/control_fs.h"

namespace prepfs {
namespace {

int err_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.err();
  }
  return 0;
}

struct Fixture : ::testing::Test {
  int counter = 0;
  std::string written;
  ControlFs fs{{
      {"stats", [this] { return "n=" + std::to_string(counter); }},
      {"evict", nullptr,
       [this](std::string_view d) {
         if (d == "fail\n") throw Error(EINVAL, "bad command");
         written += d;
       }},
  }};
  uint64_t ino(const char* name) { return fs.lookup(1, name).ino; }
};

// A file slow to render (every sample's path, once every header is read) shows size 0: a lookup,
// a getattr and an open used to render it three times, and a stat waited for every header.
TEST(ControlFs, AnUnsizedFileRendersOnlyWhenOpened) {
  int renders = 0;
  ControlFs fs{{{"samples", [&] { return std::string(100, char('a' + renders++)); }, nullptr, nullptr, false}}};
  const uint64_t ino = fs.lookup(1, "samples").ino;
  EXPECT_EQ(fs.getattr(ino).size, 0u);
  const OpenReply h = fs.open(ino, O_RDONLY);
  EXPECT_EQ(renders, 1) << "a lookup or a getattr rendered it";
  const auto got = fs.read(ino, h.fh, 0, 1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(std::string(got[0].data, got[0].len), std::string(100, 'a'));
  EXPECT_TRUE(h.direct_io);
  fs.release(ino, h.fh);
}

// A write session that cannot start (its file's state is unreadable, say) fails the open, and the
// handle it had been given went with it: it used to stay in the table for good.
TEST(ControlFs, AnOpenWhoseSessionCannotStartKeepsNoHandle) {
  ControlFs fs{{
      {"stats", [] { return std::string("s"); }},
      {"order", nullptr, nullptr,
       [](uint32_t) -> std::unique_ptr<ControlFs::WriteSession> { throw Error(EIO, "cannot start"); }},
  }};
  const uint64_t stats = fs.lookup(1, "stats").ino, order = fs.lookup(1, "order").ino;
  const uint64_t before = fs.open(stats, O_RDONLY).fh;
  EXPECT_EQ(err_of([&] { fs.open(order, O_WRONLY); }), EIO);
  const uint64_t after = fs.open(stats, O_RDONLY).fh;
  // Handles are numbered in turn: the failed open took none.
  EXPECT_EQ(after, before + 1) << "the failed open's handle was kept";
}

TEST_F(Fixture, ModesSayWhatIsWritable) {
  EXPECT_EQ(fs.getattr(ino("stats")).mode, S_IFREG | 0444u);
  EXPECT_EQ(fs.getattr(ino("evict")).mode, S_IFREG | 0200u);
  EXPECT_EQ(fs.getattr(ino("evict")).size, 0u);
}

TEST_F(Fixture, EachOpenReadsItsOwnSnapshot) {
  OpenReply a = fs.open(ino("stats"), O_RDONLY);
  counter = 7;
  OpenReply b = fs.open(ino("stats"), O_RDONLY);
  auto sa = fs.read(ino("stats"), a.fh, 0, 100);
  auto sb = fs.read(ino("stats"), b.fh, 0, 100);
  ASSERT_EQ(sa.size(), 1u);
  EXPECT_EQ(std::string(sa[0].data, sa[0].len), "n=0");
  EXPECT_EQ(std::string(sb[0].data, sb[0].len), "n=7");
  EXPECT_TRUE(a.direct_io);
  fs.release(ino("stats"), a.fh);
  fs.release(ino("stats"), b.fh);
}

TEST_F(Fixture, WritesReachTheAction) {
  OpenReply h = fs.open(ino("evict"), O_WRONLY | O_TRUNC);
  EXPECT_EQ(fs.write(ino("evict"), h.fh, 0, "1\n"), 2u);
  EXPECT_EQ(written, "1\n");
  EXPECT_EQ(err_of([&] { fs.write(ino("evict"), h.fh, 2, "fail\n"); }), EINVAL);
  fs.release(ino("evict"), h.fh);
  EXPECT_EQ(err_of([&] { fs.write(ino("evict"), h.fh, 0, "1\n"); }), EBADF);  // released handle
  EXPECT_EQ(fs.truncate(ino("evict"), 0).ino, ino("evict"));
}

TEST_F(Fixture, EverythingElseIsReadOnly) {
  EXPECT_EQ(err_of([&] { fs.open(ino("stats"), O_WRONLY); }), EROFS);
  EXPECT_EQ(err_of([&] { fs.open(ino("stats"), O_RDWR); }), EROFS);
  EXPECT_EQ(err_of([&] { fs.truncate(ino("stats"), 0); }), EROFS);
  EXPECT_EQ(err_of([&] { fs.truncate(1, 0); }), EROFS);
  OpenReply h = fs.open(ino("stats"), O_RDONLY);
  EXPECT_EQ(err_of([&] { fs.write(ino("stats"), h.fh, 0, "x"); }), EROFS);
  EXPECT_EQ(err_of([&] { fs.lookup(1, "nope"); }), ENOENT);
}

// Any user may open these files and keep the handles: each handle held its own snapshot, so the
// daemon's memory grew with every open (a `samples` of a large dataset is tens of MB). Opens that
// render what the newest open handle holds share its copy, and a user's new copies past that
// user's budget fail (ENOMEM) until the user's handles go.
TEST(ControlFs, OpenHandlesShareSameSnapshotsAndHoldAtMostTheBudget) {
  constexpr size_t kMiB = 1 << 20;
  int version = 0;
  ControlFs fs{{{"samples", [&] { return std::string(kMiB, char('a' + version)); }, nullptr, nullptr, false}},
               4 * kMiB};
  const uint64_t ino = fs.lookup(1, "samples").ino;
  std::vector<uint64_t> handles;
  for (int i = 0; i < 100; i++) handles.push_back(fs.open(ino, O_RDONLY).fh);
  EXPECT_EQ(fs.snapshot_bytes(), kMiB) << "a hundred opens of the same contents held a copy each";
  // New contents: a copy each, up to the budget.
  for (version = 1; version < 4; version++) handles.push_back(fs.open(ino, O_RDONLY).fh);
  EXPECT_EQ(fs.snapshot_bytes(), 4 * kMiB);
  version = 4;
  EXPECT_EQ(err_of([&] { fs.open(ino, O_RDONLY); }), ENOMEM);
  // The newest contents are shared still; each handle reads its own.
  version = 3;
  const uint64_t same = fs.open(ino, O_RDONLY).fh;
  auto got = fs.read(ino, same, 0, 2);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(std::string(got[0].data, got[0].len), "dd");
  got = fs.read(ino, handles.front(), kMiB - 1, 2);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(std::string(got[0].data, got[0].len), "a");
  got.clear();  // a reply holds its snapshot too, while it lasts
  fs.release(ino, same);
  // Released handles give their bytes back once no handle shares them.
  for (int i = 0; i < 99; i++) fs.release(ino, handles[size_t(i)]);
  EXPECT_EQ(fs.snapshot_bytes(), 4 * kMiB) << "a copy went while a handle still held it";
  fs.release(ino, handles[99]);
  EXPECT_EQ(fs.snapshot_bytes(), 3 * kMiB);
  version = 4;
  const uint64_t next = fs.open(ino, O_RDONLY).fh;
  EXPECT_EQ(fs.snapshot_bytes(), 4 * kMiB);
  // The budget is each user's: with this one's full, another user's opens still go through.
  version = 5;
  EXPECT_EQ(err_of([&] { fs.open(ino, O_RDONLY); }), ENOMEM);
  const uint64_t other = fs.open(ino, O_RDONLY, 23456).fh;
  EXPECT_EQ(fs.snapshot_bytes(), 5 * kMiB);
  fs.release(ino, other);
  for (size_t i = 100; i < handles.size(); i++) fs.release(ino, handles[i]);
  fs.release(ino, next);
  EXPECT_EQ(fs.snapshot_bytes(), 0u);
  // Sharing is among one user's handles: another user's open of the same contents makes its own
  // copy, so a handle that user keeps never keeps the maker's budget held.
  const uint64_t mine = fs.open(ino, O_RDONLY).fh;
  const uint64_t theirs = fs.open(ino, O_RDONLY, 23456).fh;
  EXPECT_EQ(fs.snapshot_bytes(), 2 * kMiB);
  fs.release(ino, mine);
  EXPECT_EQ(fs.snapshot_bytes(), kMiB) << "another user's handle kept the maker's copy";
  fs.release(ino, theirs);
  EXPECT_EQ(fs.snapshot_bytes(), 0u);
  // One file larger than the budget still opens (twice its size is allowed), but not twice.
  ControlFs big{{{"samples", [&] { return std::string(8 * kMiB, char('a' + version++)); }, nullptr, nullptr, false}},
                4 * kMiB};
  const uint64_t b = big.open(ino, O_RDONLY).fh;
  const uint64_t b2 = big.open(ino, O_RDONLY).fh;
  EXPECT_EQ(err_of([&] { big.open(ino, O_RDONLY); }), ENOMEM);
  big.release(ino, b);
  big.release(ino, b2);
}

}  // namespace
}  // namespace prepfs
