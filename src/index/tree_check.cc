// Tree::from_parts: a Tree from parts nobody vouches for (the persisted index), accepted only
// when they form a tree that Tree::scan could have built. The index's checksum catches torn
// writes, not edits: whoever can write ssd_dir can recompute it. Every accessor of Tree trusts
// its nodes (path() follows parents until the root, lookup() bisects a children range, name()
// slices the arena), so each of those assumptions is checked here once, in one pass.
#include <sys/stat.h>

#include <cerrno>
#include <string>

#include "prepfs/common/error.h"
#include "prepfs/index/tree.h"

namespace prepfs {
namespace {

// Larger than any JPEG header can state: a dimension over it is not from a probe.
constexpr uint32_t kMaxImageSide = 65535;

[[noreturn]] void corrupt(uint64_t id, const std::string& why) {
  throw Error(EIO, "node " + std::to_string(id) + ": " + why);
}

bool in_arena(uint64_t off, uint64_t len, const std::string& arena) {
  return off <= arena.size() && len <= arena.size() - off;
}

// A name joins paths the daemon opens beneath the source root: it must be one component.
bool is_component(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\0", 2)) == std::string_view::npos;
}

void check_node(const std::vector<Node>& nodes, const std::string& arena, uint32_t id) {
  const Node& n = nodes[id];
  const uint32_t type = n.mode & S_IFMT;
  if (type != S_IFDIR && type != S_IFREG && type != S_IFLNK) corrupt(id, "not a directory, file or symlink");
  if (!in_arena(n.name_off, n.name_len, arena)) corrupt(id, "name outside the name arena");
  const std::string_view name = std::string_view(arena).substr(n.name_off, n.name_len);
  if (type == S_IFLNK && !in_arena(n.first_child, n.size, arena)) corrupt(id, "symlink target outside the name arena");
  if (type == S_IFDIR) {
    // Breadth-first ids: a directory's children come after it, contiguous.
    if (n.nchildren > 0 && n.first_child <= id) corrupt(id, "children before their directory");
    if (uint64_t{n.first_child} + n.nchildren > nodes.size()) corrupt(id, "children beyond the last node");
  } else if (n.nchildren != 0) {
    corrupt(id, "children of something that is not a directory");
  }

  if (id == Tree::kRoot) {
    if (type != S_IFDIR || n.parent != Tree::kRoot || !name.empty()) corrupt(id, "not a root directory");
    return;
  }
  if (!is_component(name)) corrupt(id, "name is not a single path component");
  // parent < id makes every parent chain strictly decreasing: it reaches the root, no cycle.
  if (n.parent >= id) corrupt(id, "parent not before the node");
  const Node& p = nodes[n.parent];
  if ((p.mode & S_IFMT) != S_IFDIR || id < p.first_child || id - p.first_child >= p.nchildren)
    corrupt(id, "not among its parent's children");
  // Strict name order in each directory: lookup() bisects it, and no name appears twice.
  if (id > p.first_child) {
    const Node& prev = nodes[id - 1];
    if (!(std::string_view(arena).substr(prev.name_off, prev.name_len) < name))
      corrupt(id, "children out of name order");
  }
}

}  // namespace

Tree Tree::from_parts(std::vector<Node> nodes, std::string arena, std::vector<ImageDims> dims,
                      const std::vector<Owner>& owners) {
  if (nodes.empty()) throw Error(EIO, "no root node");
  if (nodes.size() >= UINT32_MAX) throw Error(EIO, "more nodes than 32-bit ids");
  if (!dims.empty() && dims.size() != nodes.size()) throw Error(EIO, "image dimensions do not match the nodes");
  uint64_t children = 0;
  for (uint32_t id = 0; id < nodes.size(); id++) {
    check_node(nodes, arena, id);
    children += nodes[id].nchildren;
    if (!dims.empty()) {
      const ImageDims d = dims[id];
      // A header not read yet (a lazy first mount stopped before the end) is kept as such.
      if (!d.known()) {
        if (!S_ISREG(nodes[id].mode)) corrupt(id, "an unprobed header on a file that is not regular");
        continue;
      }
      if ((d.width == 0) != (d.height == 0) || d.width > kMaxImageSide || d.height > kMaxImageSide ||
          (d.is_image() && !S_ISREG(nodes[id].mode)))
        corrupt(id, "impossible image dimensions");
    }
  }
  // Every node but the root sits in its parent's range (checked above); with exactly that many
  // slots in all ranges together, no range holds a node of another directory.
  if (children != nodes.size() - 1) throw Error(EIO, "children ranges overlap or leave gaps");
  Tree t;
  t.nodes_ = std::move(nodes);
  t.arena_ = std::move(arena);
  t.owners_ = std::make_unique<OwnerTable>(owners);
  t.count_files();
  if (!dims.empty()) t.set_all_dims(std::move(dims));
  return t;
}

}  // namespace prepfs
