#include "prepfs/index/index_format.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "prepfs/common/error.h"

namespace prepfs {
namespace {

constexpr char kMagic[8] = {'P', 'R', 'E', 'P', 'F', 'S', 'I', '\0'};
// 2: image dimensions per node; 3: a file's identity (device, inode, ctime) and its owner
constexpr uint32_t kVersion = 3;

void append(std::string& out, const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }

[[noreturn]] void reject(const char* why) { throw Error(EIO, why); }

// Consumes the sections of an index in order; callers check sizes before taking.
struct Reader {
  std::string_view rest;

  size_t left() const { return rest.size(); }
  std::string_view bytes(size_t n) {
    std::string_view out = rest.substr(0, n);
    rest.remove_prefix(n);
    return out;
  }
  template <class T>
  std::vector<T> take(size_t count) {
    std::vector<T> out(count);
    if (count > 0) std::memcpy(out.data(), bytes(count * sizeof(T)).data(), count * sizeof(T));
    return out;
  }
};

}  // namespace

uint64_t index_source_hash(const Source& source) {
  std::string id = source.identity();
  return XXH3_64bits(id.data(), id.size());
}

namespace {

// Whether a directory's scanned mtime is too close to the scan's start to prove it was listed
// whole. A file added just after the listing, within the same timestamp tick, leaves the
// directory's mtime and ctime as the scan saw them, so no fingerprint taken later can show the
// change (git calls such index entries "racy"). File timestamps come from the kernel's coarse
// clock, up to a tick (10 ms at HZ=100) behind the fine one the scan's start was read from;
// 100 ms covers that. A whole-second mtime suggests a file system with 1 s (or 2 s: FAT)
// timestamps, where the tick is that long, plus the coarse clock's lag. A directory whose mtime
// is past the scan's start (a clock set back, an archive unpacked with future times) is never
// trusted either: it is listed again at every mount until the clock passes it. The rule assumes
// the source's clock is this machine's, as it is for a local file system.
bool racy(const Tree& tree, uint32_t id) {
  if (tree.scanned_at_ns() == 0) return false;  // read from an index whose directories all proved unchanged
  constexpr int64_t kFineTickNs = 100'000'000, kCoarseTickNs = 2'100'000'000, kSecondNs = 1'000'000'000;
  const int64_t mtime = tree.node(id).mtime_ns;
  const int64_t tick = mtime % kSecondNs == 0 ? kCoarseTickNs : kFineTickNs;
  return mtime >= tree.scanned_at_ns() - tick;
}

// Whether the directory's metadata is still what the scan saw before listing it.
bool still_as_scanned(const Tree& tree, uint32_t id, Source& source, const std::string& path) {
  try {
    const SourceStat now = source.stat(path);
    const Node& scanned = tree.node(id);
    return S_ISDIR(now.mode) && now.mtime_ns == scanned.mtime_ns && now.identity == scanned.identity;
  } catch (const Error&) {
    return false;  // gone, or unreachable now
  }
}

}  // namespace

std::string encode_index(const Tree& tree, Source& source) {
  std::vector<DirRecord> dirs;
  uint64_t racy_dirs = 0;
  for (uint32_t id = 0; id < tree.size(); id++) {
    if (!tree.is_dir(id)) continue;
    const std::string path = tree.path(id);
    auto fp = source.dir_fingerprint(path);
    if (!fp) {  // no fingerprints (object stores): saved for its image headers, never reused as is
      dirs.clear();
      break;
    }
    // The tree lists the directory as it was when scanned, and the save comes later (after the
    // headers are read, minutes on a lazy first mount). A directory that changed in between
    // (a file added, removed or renamed) must not be trusted next time: its fingerprint now
    // would match, and the change would stay unseen until the directory changed again. The
    // fingerprint is taken first, so a change during this check shows in the stat after it.
    if (racy(tree, id)) {
      fp = DirFingerprint::never();
      racy_dirs++;
    } else if (!still_as_scanned(tree, id, source, path)) {
      fp = DirFingerprint::never();
    }
    dirs.push_back(DirRecord{id, 0, *fp});
  }
  if (racy_dirs > 0)
    spdlog::info("metadata index: directories changed within a timestamp tick of the scan, or with future "
                 "mtimes: {}; the next mount lists the source again",
                 racy_dirs);
  IndexHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.source_hash = index_source_hash(source);
  h.node_count = tree.size();
  h.arena_size = tree.arena().size();
  h.dir_count = dirs.size();
  std::vector<ImageDims> dims = tree.all_dims();
  dims.resize(tree.size());
  const std::vector<Owner> owners = tree.owners();
  h.owner_count = static_cast<uint32_t>(owners.size());

  std::string out;
  append(out, &h, sizeof h);
  append(out, tree.nodes().data(), tree.nodes().size() * sizeof(Node));
  append(out, tree.arena().data(), tree.arena().size());
  append(out, dirs.data(), dirs.size() * sizeof(DirRecord));
  append(out, dims.data(), dims.size() * sizeof(ImageDims));
  append(out, owners.data(), owners.size() * sizeof(Owner));
  uint64_t sum = XXH3_64bits(out.data(), out.size());
  append(out, &sum, sizeof sum);
  return out;
}

uint64_t index_file_size(std::string_view header) {
  if (header.size() < sizeof(IndexHeader)) return 0;
  IndexHeader h;
  std::memcpy(&h, header.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion) return 0;
  if (h.node_count > UINT32_MAX || h.dir_count > h.node_count) return 0;  // node ids are 32-bit
  uint64_t size = sizeof h + 8, part = 0;  // the header and the checksum
  const auto add = [&](uint64_t count, uint64_t each) {
    return !__builtin_mul_overflow(count, each, &part) && !__builtin_add_overflow(size, part, &size);
  };
  if (!add(h.node_count, sizeof(Node)) || !add(h.arena_size, 1) || !add(h.dir_count, sizeof(DirRecord)) ||
      !add(h.node_count, sizeof(ImageDims)) || !add(h.owner_count, sizeof(Owner)))
    return 0;
  return size;
}

StoredIndex decode_index(std::string_view data, uint64_t source_hash) {
  if (data.size() < sizeof(IndexHeader) + 8) reject("truncated");
  uint64_t sum;
  std::memcpy(&sum, data.data() + data.size() - 8, 8);
  if (XXH3_64bits(data.data(), data.size() - 8) != sum) reject("checksum mismatch");
  IndexHeader h;
  std::memcpy(&h, data.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion) reject("unknown format");
  if (h.source_hash != source_hash) reject("it belongs to another source");

  // Each count is checked against the bytes left before it is multiplied, so no product can
  // wrap around and nothing is allocated beyond the file's own size.
  Reader in{data.substr(sizeof h, data.size() - sizeof h - 8)};
  if (h.node_count == 0 || h.node_count > in.left() / (sizeof(Node) + sizeof(ImageDims))) reject("size mismatch");
  std::vector<Node> nodes = in.take<Node>(h.node_count);
  if (h.arena_size > in.left()) reject("size mismatch");
  std::string arena(in.bytes(h.arena_size));
  if (h.dir_count > in.left() / sizeof(DirRecord)) reject("size mismatch");
  std::vector<DirRecord> dirs = in.take<DirRecord>(h.dir_count);
  if (in.left() < h.node_count * sizeof(ImageDims)) reject("size mismatch");
  std::vector<ImageDims> dims = in.take<ImageDims>(h.node_count);
  if (in.left() != uint64_t(h.owner_count) * sizeof(Owner)) reject("size mismatch");
  std::vector<Owner> owners = in.take<Owner>(h.owner_count);

  StoredIndex out{Tree::from_parts(std::move(nodes), std::move(arena), std::move(dims), owners), std::move(dirs)};
  // Every directory once, in node order, as encode_index writes them (or none): a directory
  // without a record would be reused unchecked.
  size_t dir_nodes = 0;
  for (uint32_t id = 0; id < out.tree.size(); id++) dir_nodes += out.tree.is_dir(id);
  if (!out.dirs.empty() && out.dirs.size() != dir_nodes) reject("corrupt directory record");
  for (size_t i = 0; i < out.dirs.size(); i++) {
    const uint32_t node = out.dirs[i].node;
    if (node >= out.tree.size() || !out.tree.is_dir(node) || (i > 0 && node <= out.dirs[i - 1].node))
      reject("corrupt directory record");
  }
  return out;
}

}  // namespace prepfs
