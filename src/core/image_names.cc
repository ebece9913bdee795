#include "prepfs/core/image_names.h"

#include <limits.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <mutex>
#include <set>
#include <utility>

#include "prepfs/common/error.h"

namespace prepfs {
namespace {

std::string_view stem_of(std::string_view name) {
  size_t dot = name.rfind('.');
  return dot == std::string_view::npos || dot == 0 ? name : name.substr(0, dot);
}

}  // namespace

std::string ImageNames::output_name(std::string_view source_name) const {
  return std::string(stem_of(source_name)) + "." + ext_;
}

std::string ImageNames::name(uint32_t node) const {
  std::string_view n = tree_.name(node);
  return tree_.is_dir(node) ? std::string(n) : output_name(n);
}

bool ImageNames::claims(uint32_t node, std::string_view stem) const {
  return S_ISREG(tree_.mode(node)) && tree_.dims(node).is_image() && stem_of(tree_.name(node)) == stem;
}

// The first child of dir, in name order, whose output name has this stem. Children are sorted
// by full name, so every name starting with stem is in one run from lower_bound(stem).
std::optional<uint32_t> ImageNames::first_claimant(uint32_t dir, std::string_view stem) const {
  return first_with_stem(dir, stem, [&](uint32_t c) { return claims(c, stem); });
}

std::optional<uint32_t> ImageNames::first_with_stem(uint32_t dir, std::string_view stem,
                                                    const std::function<bool(uint32_t)>& pick) const {
  const Node& d = tree_.node(dir);
  uint32_t lo = d.first_child, hi = d.first_child + d.nchildren;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (tree_.name(mid) < stem)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (uint32_t c = lo; c < d.first_child + d.nchildren && tree_.name(c).starts_with(stem); c++)
    if (pick(c)) return c;
  return std::nullopt;
}

// Both views (decoded/ and augmented/) hide the same files: one line per file for the process.
void ImageNames::hide_once(uint32_t node, const std::string& why) const {
  static std::mutex mu;
  static std::set<std::pair<const Tree*, uint32_t>> logged;
  {
    std::lock_guard lock(mu);
    if (!logged.emplace(&tree_, node).second) return;
  }
  spdlog::warn("{}: not listed in decoded/ and augmented/: {}", tree_.path(node), why);
}

bool ImageNames::usable_name(uint32_t node, std::string_view stem) const {
  const size_t length = stem.size() + 1 + ext_.size();
  if (length > NAME_MAX) {
    hide_once(node, "its name there would be " + std::to_string(length) + " bytes, longer than NAME_MAX (" +
                        std::to_string(NAME_MAX) + ")");
    return false;
  }
  const std::string name = std::string(stem) + "." + ext_;
  if (auto sibling = tree_.lookup(tree_.node(node).parent, name); sibling && tree_.is_dir(*sibling)) {
    hide_once(node, "its name there, " + name + ", is a directory's (the directory is listed)");
    return false;
  }
  return true;
}

bool ImageNames::visible(uint32_t node) const {
  if (tree_.is_dir(node)) return true;
  // "x.jpg" and "x.jpeg" both map to "x.ppm": the first in name order wins, deterministically.
  std::string_view stem = stem_of(tree_.name(node));
  return claims(node, stem) && first_claimant(tree_.node(node).parent, stem) == node && usable_name(node, stem);
}

std::optional<uint32_t> ImageNames::lookup(uint32_t dir, std::string_view name) const {
  if (!tree_.is_dir(dir)) return std::nullopt;
  if (auto d = tree_.lookup(dir, name); d && tree_.is_dir(*d)) return d;
  std::string suffix = "." + ext_;
  if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) return std::nullopt;
  return first_claimant(dir, name.substr(0, name.size() - suffix.size()));
}

std::optional<uint32_t> ImageNames::unread_claimant(uint32_t dir, std::string_view name) const {
  const std::string suffix = "." + ext_;
  if (!tree_.is_dir(dir) || name.size() <= suffix.size() || !name.ends_with(suffix)) return std::nullopt;
  const std::string_view stem = name.substr(0, name.size() - suffix.size());
  return first_with_stem(dir, stem, [&](uint32_t c) {
    return S_ISREG(tree_.mode(c)) && !tree_.dims(c).known() && stem_of(tree_.name(c)) == stem;
  });
}

uint32_t ImageNames::find(uint32_t dir, std::string_view name) const {
  if (std::optional<uint32_t> child = lookup(dir, name)) return *child;
  // The views read a directory's headers before a lookup: one still unread failed its read.
  if (unread_claimant(dir, name))
    throw Error(EIO, "the header of a file that may be " + std::string(name) + " could not be read");
  throw Error(ENOENT, "no such entry");
}

}  // namespace prepfs
