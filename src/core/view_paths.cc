#include "prepfs/core/view_paths.h"

namespace prepfs {

std::optional<ViewPaths::Target> ViewPaths::resolve(std::string_view p) const {
  while (p.starts_with("./")) p.remove_prefix(2);
  while (p.starts_with('/')) p.remove_prefix(1);
  const size_t slash = p.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const std::string_view view = p.substr(0, slash);
  Form form;
  if (view == "raw")
    form = Form::raw;
  else if (view == "decoded")
    form = Form::decoded;
  else if (view == "augmented")
    form = Form::augmented;
  else
    return std::nullopt;
  uint32_t node = Tree::kRoot;
  for (size_t pos = slash + 1; pos <= p.size();) {
    size_t end = p.find('/', pos);
    if (end == std::string_view::npos) end = p.size();
    const std::string_view name = p.substr(pos, end - pos);
    pos = end + 1;
    if (name.empty()) continue;
    auto next = form == Form::raw ? tree_.lookup(node, name) : names_.lookup(node, name);
    // A lazy mount has not read most headers when a job publishes: the file that would have the
    // name is taken at its word (reading every header here would stall the order's write).
    if (!next && form != Form::raw) next = names_.unread_claimant(node, name);
    if (!next) return std::nullopt;
    node = *next;
  }
  if (node == Tree::kRoot || tree_.is_dir(node)) return std::nullopt;
  return Target{node, form};
}

std::optional<std::string> ViewPaths::image_path(uint32_t node) const {
  if (!names_.visible(node)) return std::nullopt;
  const uint32_t parent = tree_.node(node).parent;
  std::string dir = parent == Tree::kRoot ? std::string() : tree_.path(parent) + "/";
  return dir + names_.name(node);
}

}  // namespace prepfs
