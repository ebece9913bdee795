// The one pixel format of the transform layer: 8-bit RGB, HWC, rows top to bottom.
//
// That is what PIL's convert('RGB') gives, what a P6 PPM stores and what an (H, W, 3) uint8
// NPY stores, so no stage needs a conversion. An ImageView is a non-owning window with a row
// stride, so crops are free (no copy) and the resampler can read a sub-rectangle directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace prepfs::transform {

inline constexpr int kChannels = 3;

struct ImageView {
  const std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  std::ptrdiff_t stride = 0;  // bytes from one row to the next

  const std::uint8_t* row(int y) const { return data + static_cast<std::ptrdiff_t>(y) * stride; }
  // Sub-rectangle; the caller guarantees it lies inside this view.
  ImageView sub(int x, int y, int w, int h) const {
    return ImageView{row(y) + static_cast<std::ptrdiff_t>(x) * kChannels, w, h, stride};
  }
};

// Leaves new elements uninitialized: every image is written in full (by libjpeg, a resampler
// pass, a copy) before it is read, and zero-filling a decode's buffer first was 4 % of a JPEG
// render's instructions.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using PixelBuffer = std::vector<std::uint8_t, UninitializedAllocator<std::uint8_t>>;

struct Image {
  int width = 0;
  int height = 0;
  PixelBuffer pixels;  // width * height * 3 bytes, tightly packed

  Image() = default;
  Image(int w, int h)
      : width(w), height(h), pixels(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * kChannels) {}

  std::ptrdiff_t stride() const { return static_cast<std::ptrdiff_t>(width) * kChannels; }
  std::uint8_t* row(int y) { return pixels.data() + static_cast<std::ptrdiff_t>(y) * stride(); }
  const std::uint8_t* row(int y) const { return pixels.data() + static_cast<std::ptrdiff_t>(y) * stride(); }
  ImageView view() const { return ImageView{pixels.data(), width, height, stride()}; }
};

// Copies a view into a tightly packed image.
Image copy_image(ImageView v);

}  // namespace prepfs::transform
