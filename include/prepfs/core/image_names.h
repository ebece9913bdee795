// How the image views name and list files: source "a/x.JPEG" appears as "a/x.ppm" (or .npy);
// non-images are not listed; directories keep their names. Shared by decoded/ (main session)
// and augmented/ (its own session). An image is hidden (logged once) when its name in the view
// cannot be used: longer than NAME_MAX, or the name of a sibling directory (the directory wins).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "prepfs/index/tree.h"

namespace prepfs {

class ImageNames {
 public:
  ImageNames(const Tree& tree, std::string extension) : tree_(tree), ext_(std::move(extension)) {}

  // "x.JPEG" -> "x.ppm"; "x" -> "x.ppm"; "a.b.jpg" -> "a.b.ppm".
  std::string output_name(std::string_view source_name) const;
  // A child of dir listed in the view: a directory, or an image whose output name is name.
  std::optional<uint32_t> lookup(uint32_t dir, std::string_view name) const;
  // A lookup's answer: lookup(), else Error ENOENT; or EIO when a file whose header could not be
  // read (the source failed) may be the one: the kernel would remember ENOENT for that name.
  uint32_t find(uint32_t dir, std::string_view name) const;
  // The first file of dir whose header is not read yet (a lazy mount's, or one whose read failed)
  // and whose name in the view would be name if it is an image.
  std::optional<uint32_t> unread_claimant(uint32_t dir, std::string_view name) const;
  // Whether node is visible in the view (directories always; files when they are images, their
  // output name is usable, and no earlier sibling claims the same output name).
  bool visible(uint32_t node) const;
  // The name node has in the view.
  std::string name(uint32_t node) const;

 private:
  bool claims(uint32_t node, std::string_view stem) const;
  std::optional<uint32_t> first_claimant(uint32_t dir, std::string_view stem) const;
  // The first child of dir, in name order, whose name starts with stem and that `pick` takes.
  std::optional<uint32_t> first_with_stem(uint32_t dir, std::string_view stem,
                                          const std::function<bool(uint32_t)>& pick) const;
  // False (logged once per file) when node's output name is too long or a sibling directory's.
  bool usable_name(uint32_t node, std::string_view stem) const;
  void hide_once(uint32_t node, const std::string& why) const;
  const Tree& tree_;
  std::string ext_;
};

}  // namespace prepfs
