#include "resample_plan.h"

#include <algorithm>

namespace prepfs::transform::detail {
namespace {

constexpr std::uint8_t kZero = 0x80;  // shuffle index that yields a zero byte

// The output pixel and channel of each lane of block b; pixel -1 marks an unused lane.
struct BlockLanes {
  int pixel[HorizontalPlan::kLanes];
  int channel[HorizontalPlan::kLanes];
};

BlockLanes block_lanes(int b, bool per_pixel, int out_bytes) {
  BlockLanes l{};
  for (int i = 0; i < HorizontalPlan::kLanes; ++i) {
    const int j = per_pixel ? (i < 3 ? 3 * b + i : out_bytes) : 4 * b + i;  // output byte
    l.pixel[i] = j < out_bytes ? j / 3 : -1;
    l.channel[i] = j % 3;
  }
  return l;
}

// Fills the plan's blocks; false when a block's samples do not fit in one 16-byte window.
// offsets gets each lane's sample offset from its block's base (-1: unused lane).
bool lay_out_blocks(const AxisCoeffs& c, HorizontalPlan& p, int used, std::vector<int>& block_taps,
                    std::vector<int>& offsets) {
  const int out_bytes = 3 * c.out_size;
  for (int b = 0; b < used; ++b) {
    const BlockLanes l = block_lanes(b, p.per_pixel, out_bytes);
    const int base_pixel = c.first[static_cast<std::size_t>(l.pixel[0])];
    p.block_base[static_cast<std::size_t>(b)] = 3 * base_pixel;
    int taps = 0;
    for (int i = 0; i < HorizontalPlan::kLanes; ++i) {
      const int x = l.pixel[i];
      if (x < 0) continue;
      const std::size_t ux = static_cast<std::size_t>(x);
      const int offset = 3 * (c.first[ux] - base_pixel) + l.channel[i];
      if (offset >= HorizontalPlan::kWindow) return false;
      offsets[static_cast<std::size_t>(4 * b + i)] = offset;
      taps = std::max(taps, c.count[ux]);
      const std::int32_t* k = c.weights(x);
      for (int t = 0; t < c.count[ux]; ++t) {
        p.weights[(static_cast<std::size_t>(t) * p.blocks + b) * 4 + i] = k[t];
      }
    }
    block_taps[static_cast<std::size_t>(b)] = taps;
  }
  return true;
}

// Decides per vector whether its blocks can share one window load, and writes the shuffle and
// permutation controls accordingly.
void lay_out_vectors(HorizontalPlan& p, int used, const std::vector<int>& block_taps, const std::vector<int>& offsets) {
  const int bpv = p.blocks_per_vector;
  for (int v = 0; v < p.vectors; ++v) {
    const int b0 = v * bpv;
    const std::size_t uv = static_cast<std::size_t>(v);
    p.window_base[uv] = p.block_base[static_cast<std::size_t>(b0)];
    int taps = 0;
    bool shared = bpv > 1;
    for (int b = b0; b < b0 + bpv && b < used; ++b) {
      taps = std::max(taps, block_taps[static_cast<std::size_t>(b)]);
      // The block takes the 4 lanes (16 bytes) of the shared window that start at its own
      // window's lane; its samples then sit `shift` bytes further in.
      const int rel = p.block_base[static_cast<std::size_t>(b)] - p.window_base[uv];
      if (rel / 4 + 4 > 4 * bpv) shared = false;
      for (int i = 0; i < HorizontalPlan::kLanes; ++i) {
        if (offsets[static_cast<std::size_t>(4 * b + i)] + rel % 4 >= HorizontalPlan::kWindow) shared = false;
      }
    }
    p.taps[uv] = taps;
    p.shared_window[uv] = shared ? 1 : 0;
    for (int b = b0; b < b0 + bpv; ++b) {
      const std::size_t ub = static_cast<std::size_t>(b);
      const int rel = b < used ? p.block_base[ub] - p.window_base[uv] : 0;
      const int shift = shared ? rel % 4 : 0;
      for (int i = 0; i < HorizontalPlan::kLanes; ++i) {
        p.lane_index[4 * ub + static_cast<std::size_t>(i)] = shared ? rel / 4 + i : (b - b0) * 4 + i;
        const int offset = offsets[4 * ub + static_cast<std::size_t>(i)];
        if (offset >= 0)
          p.byte_index[16 * ub + 4 * static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(offset + shift);
      }
    }
    // What the vector's loads read, at most (a vector runs the taps of its busiest block).
    const int last_tap = 3 * std::max(taps - 1, 0);
    if (shared) {
      p.read_end = std::max(p.read_end, p.window_base[uv] + last_tap + HorizontalPlan::kWindow * bpv);
    } else {
      for (int b = b0; b < b0 + bpv; ++b) {
        p.read_end =
            std::max(p.read_end, p.block_base[static_cast<std::size_t>(b)] + last_tap + HorizontalPlan::kWindow);
      }
    }
  }
}

bool lay_out(const AxisCoeffs& c, int blocks_per_vector, bool per_pixel, HorizontalPlan& p) {
  const int out_bytes = 3 * c.out_size;
  const int used = per_pixel ? c.out_size : (out_bytes + 3) / 4;
  p = HorizontalPlan{};
  p.blocks_per_vector = blocks_per_vector;
  p.per_pixel = per_pixel;
  p.out_width = c.out_size;
  p.vectors = (used + blocks_per_vector - 1) / blocks_per_vector;
  p.blocks = p.vectors * blocks_per_vector;
  p.max_taps = c.ksize;
  const std::size_t blocks = static_cast<std::size_t>(p.blocks);
  const std::size_t vectors = static_cast<std::size_t>(p.vectors);
  p.taps.assign(vectors, 0);
  p.shared_window.assign(vectors, 0);
  p.window_base.assign(vectors, 0);
  p.block_base.assign(blocks, 0);
  p.lane_index.assign(blocks * 4, 0);
  p.byte_index.assign(blocks * 16, kZero);
  p.weights.assign(static_cast<std::size_t>(p.max_taps) * blocks * 4, 0);
  std::vector<int> block_taps(blocks, 0);
  std::vector<int> offsets(blocks * 4, -1);
  if (!lay_out_blocks(c, p, used, block_taps, offsets)) return false;
  lay_out_vectors(p, used, block_taps, offsets);
  return true;
}

}  // namespace

HorizontalPlan horizontal_plan(const AxisCoeffs& c, int blocks_per_vector) {
  HorizontalPlan p;
  // A block of one pixel always fits: its three samples are adjacent.
  if (!lay_out(c, blocks_per_vector, /*per_pixel=*/false, p)) lay_out(c, blocks_per_vector, /*per_pixel=*/true, p);
  return p;
}

}  // namespace prepfs::transform::detail
