// VariantPages on its own: the answer each open gets (keep / invalidate / bypass), and that its
// per-file state is taken only for files that are opened.
#include "prepfs/core/variant_pages.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace prepfs {
namespace {

using Mode = VariantPages::Mode;

ChunkRef bytes_of(const std::string& text) {
  auto c = Chunk::allocate(text.size());
  std::memcpy(c->mutable_data(), text.data(), text.size());
  return c;
}

TEST(VariantPages, AnOpenOfNewBytesInvalidatesAndARepeatKeepsOnceAReadShowedTheOldPagesGone) {
  VariantPages pages(10);
  const ChunkRef v0 = bytes_of("variant zero");
  EXPECT_EQ(pages.open(3, 0, v0), Mode::invalidate);
  // No read yet: the kernel may still hold older pages, so the repeat open drops them too.
  EXPECT_EQ(pages.open(3, 0, v0), Mode::invalidate);
  pages.invalidated(3);
  EXPECT_EQ(pages.open(3, 0, v0), Mode::keep);
  // The same content rendered again (another entry) is kept as well.
  EXPECT_EQ(pages.open(3, 0, bytes_of("variant zero")), Mode::keep);
}

TEST(VariantPages, OtherBytesBypassWhileReadersOfTheCachedBytesAreOpen) {
  VariantPages pages(10);
  const ChunkRef v0 = bytes_of("variant zero"), v1 = bytes_of("variant one");
  EXPECT_EQ(pages.open(7, 0, v0), Mode::invalidate);
  pages.invalidated(7);
  EXPECT_EQ(pages.open(7, 1, v1), Mode::bypass) << "v0's handle still fills pages";
  pages.release(7, Mode::bypass);
  pages.release(7, Mode::invalidate);
  EXPECT_EQ(pages.open(7, 1, v1), Mode::invalidate) << "nobody reads v0 now: v1 takes the pages";
  // Same variant number, other content (rendered on another path): not the cached bytes.
  pages.release(7, Mode::invalidate);
  EXPECT_EQ(pages.open(7, 1, bytes_of("variant one, other pixels")), Mode::invalidate);
}

TEST(VariantPages, StateIsTakenOnlyForTheBlocksOfOpenedFiles) {
  VariantPages pages(100'000'000);  // as many files as a huge dataset
  EXPECT_EQ(pages.allocated_bytes(), 0u);
  const ChunkRef v = bytes_of("v");
  pages.open(5, 0, v);
  pages.open(6, 0, v);
  const uint64_t one_block = pages.allocated_bytes();
  EXPECT_GT(one_block, 0u);
  EXPECT_LT(one_block, 1u << 20);
  pages.open(99'999'999, 0, v);  // the last file, in another block
  EXPECT_EQ(pages.allocated_bytes(), 2 * one_block);
  // Files in different blocks keep separate state.
  EXPECT_EQ(pages.open(5, 0, v), Mode::invalidate);
  pages.invalidated(99'999'999);
  EXPECT_EQ(pages.open(99'999'999, 0, v), Mode::keep);
  EXPECT_EQ(pages.open(5, 0, v), Mode::invalidate) << "node 5 saw no read yet";
}

}  // namespace
}  // namespace prepfs
