#include "prepfs/index/image_probe.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <atomic>
#include <thread>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/transform/jpeg_header.h"

namespace prepfs {

std::optional<ImageDims> dims_from_head(std::span<const uint8_t> head, uint64_t file_size) {
  using transform::HeaderResult;
  if (file_size < 4) return ImageDims{};
  if (!transform::looks_like_jpeg(head)) return ImageDims{};
  HeaderResult h = transform::parse_jpeg_header(head, head.size() >= file_size);
  switch (h.status) {
    case HeaderResult::Status::kOk: return ImageDims{h.info.width, h.info.height};
    case HeaderResult::Status::kNeedMore: return std::nullopt;
    default: return ImageDims{};
  }
}

ImageDims probe_image(Source& source, const std::string& rel, const FileVersion& version) {
  using transform::HeaderResult;
  if (version.size < 4) return {};
  size_t want = static_cast<size_t>(std::min<uint64_t>(version.size, transform::kHeaderProbeBytes));
  std::vector<uint8_t> buf;
  for (int attempt = 0; attempt < 4; attempt++) {
    buf.resize(want);
    size_t n = source.read(rel, version, 0, buf.data(), want);
    buf.resize(n);
    if (attempt == 0 && !transform::looks_like_jpeg(buf)) return {};
    HeaderResult h = transform::parse_jpeg_header(buf, n >= version.size);
    switch (h.status) {
      case HeaderResult::Status::kOk: return ImageDims{h.info.width, h.info.height};
      case HeaderResult::Status::kNeedMore:
        // An APPn block (EXIF thumbnail, ICC profile) before the frame header: read up to it.
        want = static_cast<size_t>(std::min<uint64_t>(version.size, std::max(h.need_bytes, want * 4)));
        continue;
      default: spdlog::info("{}: not served in decoded/ and augmented/: {}", rel, h.message); return {};
    }
  }
  spdlog::info("{}: not served in decoded/ and augmented/: header too large", rel);
  return {};
}

namespace {

// The node at tree's path rel in another tree, walking it by components.
std::optional<uint32_t> find_path(const Tree& t, const std::string& rel) {
  uint32_t cur = Tree::kRoot;
  for (size_t pos = 0; pos <= rel.size();) {
    size_t slash = rel.find('/', pos);
    if (slash == std::string::npos) slash = rel.size();
    auto next = t.lookup(cur, std::string_view(rel).substr(pos, slash - pos));
    if (!next) return std::nullopt;
    cur = *next;
    pos = slash + 1;
  }
  return cur;
}

// An index written before S3 versions had an identity (the ETag's hash; 0 then) names the same
// object when size and mtime agree (mtime folds in 30 bits of that hash): its headers are kept
// rather than read again for every object of the bucket after the upgrade.
bool same_version(const FileVersion& indexed, const FileVersion& now) {
  if (indexed.identity == 0 && now.identity != 0)
    return indexed.size == now.size && indexed.mtime_ns == now.mtime_ns;
  return indexed == now;
}

}  // namespace

void probe_images(Tree& tree, Source& source, unsigned threads, const Tree* previous) {
  std::vector<uint32_t> files;
  std::vector<ImageDims> dims(tree.size());
  size_t reused = 0;
  for (uint32_t id = 0; id < tree.size(); id++) {
    if (!S_ISREG(tree.mode(id)) || tree.node(id).size == 0) continue;
    if (previous && previous->all_dims().size() == previous->size()) {
      auto old = find_path(*previous, tree.path(id));
      if (old && S_ISREG(previous->mode(*old)) && previous->dims(*old).known() &&
          same_version(previous->version(*old), tree.version(id))) {
        dims[id] = previous->dims(*old);
        reused++;
        continue;
      }
    }
    files.push_back(id);
  }
  if (reused) spdlog::info("image headers: {} reused from the previous index, {} to read", reused, files.size());
  if (threads == 0) {  // lazily: the store and the HeaderProber read them while serving
    for (uint32_t id : files) dims[id] = ImageDims::unprobed();
    tree.set_all_dims(std::move(dims));
    return;
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      uint32_t id = files[i];
      try {
        dims[id] = probe_image(source, tree.path(id), tree.version(id));
      } catch (const std::exception& e) {
        // Left unread, not "no image": the views read it again at its next use.
        dims[id] = ImageDims::unprobed();
        spdlog::warn("{}: cannot read its header ({}); it is read again at its next use", tree.path(id), e.what());
      }
    }
  };
  std::vector<std::thread> pool;
  unsigned n = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(files.size() / 8 + 1)));
  for (unsigned t = 0; t < n; t++) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  tree.set_all_dims(std::move(dims));
}

}  // namespace prepfs
