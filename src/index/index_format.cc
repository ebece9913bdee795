#include "prepfs/index/index_format.h"

#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "prepfs/common/error.h"

namespace prepfs {
namespace {

constexpr char kMagic[8] = {'P', 'R', 'E', 'P', 'F', 'S', 'I', '\0'};
constexpr uint32_t kVersion = 2;  // 2: image dimensions per node

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t source_hash;  // index_source_hash()
  uint64_t node_count;
  uint64_t arena_size;
  uint64_t dir_count;
};

void append(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }

[[noreturn]] void reject(const char* why) { throw Error(EIO, why); }

}  // namespace

uint64_t index_source_hash(const Source& source) {
  std::string id = source.identity();
  return XXH3_64bits(id.data(), id.size());
}

std::string encode_index(const Tree& tree, Source& source) {
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
  h.source_hash = index_source_hash(source);
  h.node_count = tree.size();
  h.arena_size = tree.arena().size();
  h.dir_count = dirs.size();
  std::vector<ImageDims> dims = tree.all_dims();
  dims.resize(tree.size());

  std::string out;
  append(out, &h, sizeof h);
  append(out, tree.nodes().data(), tree.nodes().size() * sizeof(Node));
  append(out, tree.arena().data(), tree.arena().size());
  append(out, dirs.data(), dirs.size() * sizeof(DirRecord));
  append(out, dims.data(), dims.size() * sizeof(ImageDims));
  uint64_t sum = XXH3_64bits(out.data(), out.size());
  append(out, &sum, sizeof sum);
  return out;
}

StoredIndex decode_index(std::string_view data, uint64_t source_hash) {
  if (data.size() < sizeof(Header) + 8) reject("truncated");
  uint64_t sum;
  std::memcpy(&sum, data.data() + data.size() - 8, 8);
  if (XXH3_64bits(data.data(), data.size() - 8) != sum) reject("checksum mismatch");
  Header h;
  std::memcpy(&h, data.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion) reject("unknown format");
  if (h.source_hash != source_hash) reject("it belongs to another source");
  size_t need = sizeof h + h.node_count * sizeof(Node) + h.arena_size + h.dir_count * sizeof(DirRecord) +
                h.node_count * sizeof(ImageDims) + 8;
  if (need != data.size() || h.node_count == 0) reject("size mismatch");

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
    if (r.node >= out.tree.size() || !out.tree.is_dir(r.node)) reject("corrupt directory record");
  return out;
}

}  // namespace prepfs
