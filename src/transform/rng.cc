#include "prepfs/transform/rng.h"

#include <cmath>
#include <stdexcept>
#include <string>

// The streaming state type is only visible with XXH_STATIC_LINKING_ONLY (stack allocation).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace prepfs::transform {
namespace {

std::uint64_t splitmix64(std::uint64_t& x) noexcept {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

__extension__ typedef unsigned __int128 u128;  // __extension__: no -Wpedantic warning

inline std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }

void put_le64(unsigned char* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace

Rng::Rng(std::uint64_t seed) noexcept {
  std::uint64_t x = seed;
  for (auto& w : s_) w = splitmix64(x);  // never all zero: splitmix64 is a bijection of a counter
}

Rng Rng::for_variant(std::uint64_t seed, std::string_view path, std::uint64_t variant) noexcept {
  // Streaming XXH3 so the path needs no concatenation buffer (and no allocation).
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  unsigned char head[16];
  put_le64(head, seed);
  put_le64(head + 8, variant);
  XXH3_64bits_update(&st, head, sizeof head);
  XXH3_64bits_update(&st, path.data(), path.size());
  return Rng(XXH3_64bits_digest(&st));
}

std::uint64_t Rng::next() noexcept {
  // xoshiro256** (Blackman & Vigna).
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform01() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::uniform(double lo, double hi) {
  const double v = lo + (hi - lo) * uniform01();
  return v < hi ? v : std::nextafter(hi, lo);  // rounding must not reach hi: [lo, hi)
}

std::int64_t Rng::randint(std::int64_t lo, std::int64_t hi) {
  if (!(lo < hi)) throw std::invalid_argument("randint: empty range");
  const std::uint64_t range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
  // Lemire's multiply-and-reject: unbiased, one multiplication in the common case.
  u128 m = static_cast<u128>(next()) * range;
  std::uint64_t low = static_cast<std::uint64_t>(m);
  if (low < range) {
    const std::uint64_t threshold = (0 - range) % range;
    while (low < threshold) {
      m = static_cast<u128>(next()) * range;
      low = static_cast<std::uint64_t>(m);
    }
  }
  // In unsigned arithmetic: over a range past 2^63 the offset does not fit an int64_t, and lo plus
  // it would overflow (undefined; the sum itself fits, and wraps to it here).
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + static_cast<std::uint64_t>(m >> 64));
}

}  // namespace prepfs::transform
