#include "prepfs/index/tree_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "prepfs/common/error.h"
#include "prepfs/index/image_probe.h"

namespace prepfs {
namespace {

constexpr char kMagic[8] = {'P', 'R', 'E', 'P', 'F', 'S', 'I', '\0'};
constexpr uint32_t kVersion = 2;  // 2: image dimensions per node

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t source_hash;  // XXH3 of Source::identity()
  uint64_t node_count;
  uint64_t arena_size;
  uint64_t dir_count;
};

struct DirRecord {
  uint32_t node;
  uint32_t reserved;
  DirFingerprint fp;
};

uint64_t source_hash(Source& s) {
  std::string id = s.identity();
  return XXH3_64bits(id.data(), id.size());
}

}  // namespace

void save_tree(const Tree& tree, Source& source, const std::string& path) {
  std::vector<DirRecord> dirs;
  for (uint32_t id = 0; id < tree.size(); id++) {
    if (!tree.is_dir(id)) continue;
    auto fp = source.dir_fingerprint(tree.path(id));
    if (!fp) {  // no fingerprints (object stores): saved for its image headers, never reused as is
      dirs.clear();
      break;
    }
    dirs.push_back(DirRecord{id, 0, *fp});
  }
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.source_hash = source_hash(source);
  h.node_count = tree.size();
  h.arena_size = tree.arena().size();
  h.dir_count = dirs.size();

  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  auto put = [&](std::ofstream& out, const void* p, size_t n) {
    XXH3_64bits_update(&st, p, n);
    out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
  };
  std::string tmp = path + ".tmp";
  // Private (0600): the index names every file of the source.
  int fd = ::open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw_errno(errno, "write index " + tmp);
  ::close(fd);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw_errno(errno, "write index " + tmp);
    put(out, &h, sizeof h);
    put(out, tree.nodes().data(), tree.nodes().size() * sizeof(Node));
    put(out, tree.arena().data(), tree.arena().size());
    put(out, dirs.data(), dirs.size() * sizeof(DirRecord));
    std::vector<ImageDims> dims = tree.all_dims();
    dims.resize(tree.size());
    put(out, dims.data(), dims.size() * sizeof(ImageDims));
    uint64_t sum = XXH3_64bits_digest(&st);
    out.write(reinterpret_cast<const char*>(&sum), sizeof sum);
    out.flush();
    if (!out) throw_errno(errno ? errno : EIO, "write index " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno(errno, "rename index " + path);
}

namespace {

struct StoredIndex {
  Tree tree;
  std::vector<DirRecord> dirs;
};

// Reads an index file and checks its integrity and owner; says nothing about freshness.
std::optional<StoredIndex> read_index(Source& source, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string data = ss.str();
  auto reject = [&](const char* why) -> std::optional<StoredIndex> {
    spdlog::info("metadata index {} not usable: {}", path, why);
    return std::nullopt;
  };
  if (data.size() < sizeof(Header) + 8) return reject("truncated");
  uint64_t sum;
  std::memcpy(&sum, data.data() + data.size() - 8, 8);
  if (XXH3_64bits(data.data(), data.size() - 8) != sum) return reject("checksum mismatch");
  Header h;
  std::memcpy(&h, data.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion) return reject("unknown format");
  if (h.source_hash != source_hash(source)) return reject("it belongs to another source");
  size_t need = sizeof h + h.node_count * sizeof(Node) + h.arena_size + h.dir_count * sizeof(DirRecord) +
                h.node_count * sizeof(ImageDims) + 8;
  if (need != data.size() || h.node_count == 0) return reject("size mismatch");

  const char* p = data.data() + sizeof h;
  std::vector<Node> nodes(h.node_count);
  std::memcpy(nodes.data(), p, h.node_count * sizeof(Node));
  p += h.node_count * sizeof(Node);
  std::string arena(p, h.arena_size);
  p += h.arena_size;
  StoredIndex out{Tree::from_parts(std::move(nodes), std::move(arena)), std::vector<DirRecord>(h.dir_count)};
  std::memcpy(out.dirs.data(), p, h.dir_count * sizeof(DirRecord));
  p += h.dir_count * sizeof(DirRecord);
  std::vector<ImageDims> dims(h.node_count);
  std::memcpy(dims.data(), p, h.node_count * sizeof(ImageDims));
  out.tree.set_all_dims(std::move(dims));
  for (const DirRecord& r : out.dirs)
    if (r.node >= out.tree.size() || !out.tree.is_dir(r.node)) return reject("corrupt directory record");
  return out;
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
