#include "prepfs/source/s3_keys.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

namespace prepfs::s3 {

const char* skip_reason_text(SkipReason r) {
  switch (r) {
    case SkipReason::empty_segment: return "an empty path segment (leading '/' or '//')";
    case SkipReason::dot_segment: return "a '.' or '..' segment";
    case SkipReason::long_name: return "a segment longer than 255 bytes";
    case SkipReason::nul_byte: return "a NUL byte";
    case SkipReason::shadowed_by_prefix: return "it is also a prefix of other keys (served as a directory)";
    case SkipReason::huge_size: return "a size past 2^63 - 1 bytes (no file can be that large)";
    case SkipReason::kCount: break;
  }
  return "?";
}

void KeyTree::skip(SkipReason r, std::string_view key) {
  if (skipped_[static_cast<int>(r)]++ == 0)
    spdlog::warn("s3: skipping key '{}': {} (further keys skipped for this reason are only counted)", key,
                 skip_reason_text(r));
}

void KeyTree::add_dirs(std::string_view dir, int64_t mtime_ns) {
  // dir and each of its ancestors; stop early once an ancestor is known and already as new.
  while (!dir.empty()) {
    auto [it, fresh] = dirs_.try_emplace(std::string(dir), mtime_ns);
    if (!fresh) {
      if (it->second >= mtime_ns) return;
      it->second = mtime_ns;
    }
    size_t slash = dir.rfind('/');
    dir = slash == std::string_view::npos ? std::string_view{} : dir.substr(0, slash);
  }
}

void KeyTree::add(std::string_view key, uint64_t size, int64_t mtime_ns, uint64_t identity) {
  if (key.empty()) return;  // the prefix itself (a marker of the root)
  std::string_view path = key;
  bool marker = false;
  if (path.back() == '/') {
    marker = true;
    path.remove_suffix(1);
    if (path.empty()) return skip(SkipReason::empty_segment, key);
  }
  if (path.find('\0') != std::string_view::npos) return skip(SkipReason::nul_byte, key);
  // st_size and every offset are signed 64-bit: a listing's larger Size would turn negative.
  if (!marker && size > uint64_t(INT64_MAX)) return skip(SkipReason::huge_size, key);
  for (size_t start = 0;;) {
    size_t end = path.find('/', start);
    std::string_view seg = path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (seg.empty()) return skip(SkipReason::empty_segment, key);
    if (seg == "." || seg == "..") return skip(SkipReason::dot_segment, key);
    if (seg.size() > 255) return skip(SkipReason::long_name, key);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  if (marker) {
    dir_markers_++;
    add_dirs(path, mtime_ns);
    return;
  }
  size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) add_dirs(path.substr(0, slash), mtime_ns);
  files_.push_back(File{std::string(path), size, mtime_ns, identity});
}

std::vector<TreeEntry> KeyTree::finish() {
  std::vector<TreeEntry> out;
  out.reserve(files_.size() + dirs_.size() + 1);
  int64_t newest = 0;
  for (const auto& [path, mtime] : dirs_) newest = std::max(newest, mtime);
  for (const File& f : files_) newest = std::max(newest, f.mtime_ns);
  out.push_back(TreeEntry{"", SourceStat{kS3DirMode, 0, newest, {}}});
  for (File& f : files_) {
    if (dirs_.count(f.path)) {
      skip(SkipReason::shadowed_by_prefix, f.path);
      continue;
    }
    out.push_back(TreeEntry{std::move(f.path), SourceStat{kS3FileMode, f.size, f.mtime_ns, {}, f.identity}});
  }
  files_.clear();
  files_.shrink_to_fit();
  for (auto& [path, mtime] : dirs_) out.push_back(TreeEntry{path, SourceStat{kS3DirMode, 0, mtime, {}}});
  dirs_.clear();
  std::sort(out.begin() + 1, out.end(), [](const TreeEntry& a, const TreeEntry& b) { return a.path < b.path; });
  // S3 keys are unique, but a listing that repeats one (a server bug, or a page boundary
  // replayed) must not give the tree two entries of the same name.
  auto dup =
      std::unique(out.begin() + 1, out.end(), [](const TreeEntry& a, const TreeEntry& b) { return a.path == b.path; });
  out.erase(dup, out.end());
  return out;
}

}  // namespace prepfs::s3
