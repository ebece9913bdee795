// The vocabulary every layer shares: the three forms a sample is served and cached in, and the
// tiers that hold them. The cache, the partition model, the placer and the views all speak it,
// so there is one enum of each and no casts between twins.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace prepfs {

// raw: the source's bytes; decoded: the image's pixels (PPM/NPY); augmented: one variant of the
// augmentation pipeline's output.
enum class Form : uint8_t { raw = 0, decoded = 1, augmented = 2 };
inline constexpr std::size_t kForms = 3;
inline constexpr std::array<Form, kForms> kAllForms{Form::raw, Form::decoded, Form::augmented};

// Where a cached entry lives.
enum class Tier : uint8_t { ram = 0, ssd = 1 };
inline constexpr std::size_t kTiers = 2;
inline constexpr std::array<Tier, kTiers> kAllTiers{Tier::ram, Tier::ssd};

constexpr std::size_t index_of(Form f) { return static_cast<std::size_t>(f); }
constexpr std::size_t index_of(Tier t) { return static_cast<std::size_t>(t); }

// "raw", "decoded", "augmented"; "ram", "ssd".
constexpr const char* form_name(Form f) {
  switch (f) {
    case Form::raw: return "raw";
    case Form::decoded: return "decoded";
    case Form::augmented: return "augmented";
  }
  return "?";
}
constexpr const char* tier_name(Tier t) { return t == Tier::ram ? "ram" : "ssd"; }

}  // namespace prepfs
