#include "prepfs/index/tree_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "prepfs/common/error.h"
#include "prepfs/index/image_probe.h"
#include "prepfs/index/index_format.h"

namespace prepfs {

void save_tree(const Tree& tree, Source& source, const std::string& path) {
  std::string bytes = encode_index(tree, source);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw_errno(errno, "write index " + tmp);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw_errno(errno ? errno : EIO, "write index " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno(errno, "rename index " + path);
}

namespace {

// Reads an index file and checks its integrity and owner; says nothing about freshness.
std::optional<StoredIndex> read_index(Source& source, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return decode_index(ss.str(), index_source_hash(source));
  } catch (const Error& e) {
    spdlog::info("metadata index {} not usable: {}", path, e.what());
    return std::nullopt;
  }
}

}  // namespace

std::optional<Tree> load_tree(Source& source, const std::string& path) {
  auto stored = read_index(source, path);
  if (!stored) return std::nullopt;
  if (stored->dirs.empty()) {
    spdlog::info("metadata index {} not reused: the source has no directory fingerprints", path);
    return std::nullopt;
  }
  for (const DirRecord& r : stored->dirs) {
    auto fp = source.dir_fingerprint(stored->tree.path(r.node));
    if (!fp || !(*fp == r.fp)) {
      spdlog::info("metadata index {} not reused: {} changed", path, stored->tree.path(r.node));
      return std::nullopt;
    }
  }
  return std::move(stored->tree);
}

TreeLoad load_or_scan_tree(Source& source, const std::string& path) {
  if (auto tree = load_tree(source, path)) return TreeLoad{std::move(*tree), true};
  TreeLoad out{Tree::scan(source), false};
  // The previous index, stale as it may be, still knows the headers of files that kept their
  // version: only new or changed files are probed again (one read each, a round trip on S3).
  std::optional<StoredIndex> previous = read_index(source, path);
  probe_images(out.tree, source, 16, previous ? &previous->tree : nullptr);
  try {
    save_tree(out.tree, source, path);
  } catch (const Error& e) {
    spdlog::warn("cannot persist the metadata index ({}); the next mount will rescan", e.what());
  }
  return out;
}

}  // namespace prepfs
