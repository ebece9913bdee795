#include "prepfs/index/tree.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <deque>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "prepfs/common/error.h"
#include "prepfs/common/fs_util.h"

namespace prepfs {
namespace {

// A node as the scan sees it, before ids are assigned breadth-first.
struct ScanEntry {
  std::string name;
  SourceStat st;
  std::vector<uint32_t> children;  // indices into the scan vector
};

}  // namespace

Tree Tree::scan(Source& source) {
  // Before the first listing: every change the listings could have missed comes after it.
  const int64_t started_ns = wall_clock_ns();
  std::vector<ScanEntry> entries;
  std::unordered_map<std::string, uint32_t> dir_index;  // rel path of a directory -> entry
  source.scan([&](const std::string& rel, const SourceStat& st) {
    if (entries.size() >= std::numeric_limits<uint32_t>::max() - 1)
      throw Error(EFBIG, "source has more entries than prepfs can index");
    uint32_t idx = static_cast<uint32_t>(entries.size());
    size_t slash = rel.rfind('/');
    std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
    if (name.size() > 255) throw Error(ENAMETOOLONG, "name too long in source: " + rel);
    entries.push_back(ScanEntry{name, st, {}});
    if (S_ISDIR(st.mode)) dir_index.emplace(rel, idx);
    if (!rel.empty()) {
      auto parent = dir_index.find(slash == std::string::npos ? std::string() : rel.substr(0, slash));
      if (parent == dir_index.end()) throw Error(EIO, "source scan visited " + rel + " before its directory");
      entries[parent->second].children.push_back(idx);
    }
  });
  if (entries.empty() || !S_ISDIR(entries[0].st.mode)) throw Error(ENOTDIR, "source root is not a directory");
  dir_index.clear();

  Tree t;
  t.scanned_at_ns_ = started_ns;
  std::vector<Owner> owners;  // distinct, in order of appearance
  {
    std::unordered_set<uint64_t> seen;
    for (const ScanEntry& e : entries)
      if (seen.insert(uint64_t(e.st.owner.uid) << 32 | e.st.owner.gid).second) owners.push_back(e.st.owner);
  }
  t.owners_ = std::make_unique<OwnerTable>(owners);
  t.nodes_.resize(entries.size());
  std::vector<uint32_t> id_of(entries.size());
  std::deque<uint32_t> queue{0};  // scan indices, breadth-first: children get contiguous ids
  id_of[0] = 0;
  uint32_t next_id = 1;
  auto fill = [&](uint32_t idx, uint32_t parent_id) {
    ScanEntry& e = entries[idx];
    Node& n = t.nodes_[id_of[idx]];
    n = Node{};
    n.parent = parent_id;
    n.name_off = static_cast<uint32_t>(t.arena_.size());
    n.name_len = static_cast<uint16_t>(e.name.size());
    t.arena_ += e.name;
    n.mode = e.st.mode;
    n.size = e.st.size;
    n.mtime_ns = e.st.mtime_ns;
    n.identity = e.st.identity;
    n.owner = t.owners_->intern(e.st.owner);
    if (S_ISLNK(e.st.mode)) {
      n.first_child = static_cast<uint32_t>(t.arena_.size());
      t.arena_ += e.st.symlink_target;
    }
    if (t.arena_.size() > std::numeric_limits<uint32_t>::max())
      throw Error(EFBIG, "source names exceed the index's 4 GiB name arena");
  };
  fill(0, 0);
  while (!queue.empty()) {
    uint32_t idx = queue.front();
    queue.pop_front();
    ScanEntry& e = entries[idx];
    std::sort(e.children.begin(), e.children.end(),
              [&](uint32_t a, uint32_t b) { return entries[a].name < entries[b].name; });
    Node& dir = t.nodes_[id_of[idx]];
    dir.first_child = next_id;
    dir.nchildren = static_cast<uint32_t>(e.children.size());
    uint32_t dir_id = id_of[idx];
    for (uint32_t c : e.children) {
      id_of[c] = next_id++;
      fill(c, dir_id);
      if (S_ISDIR(entries[c].st.mode)) queue.push_back(c);
    }
    std::vector<uint32_t>().swap(e.children);
  }
  t.arena_.shrink_to_fit();
  t.count_files();
  return t;
}

std::string_view Tree::name(uint32_t id) const {
  const Node& n = nodes_[id];
  return std::string_view(arena_).substr(n.name_off, n.name_len);
}

// Built back to front into one allocation: this runs on every request (the cache keys and the
// source reads need the path), and a chain of appends costs several.
std::string Tree::path(uint32_t id) const {
  size_t len = 0;
  for (uint32_t cur = id; cur != kRoot; cur = nodes_[cur].parent) len += nodes_[cur].name_len + 1u;
  if (len == 0) return {};
  std::string p(len - 1, '/');
  size_t end = p.size();
  for (uint32_t cur = id; cur != kRoot; cur = nodes_[cur].parent) {
    const Node& n = nodes_[cur];
    end -= n.name_len;
    std::memcpy(p.data() + end, arena_.data() + n.name_off, n.name_len);
    if (end > 0) end--;  // the '/' before this component is already there
  }
  return p;
}

std::string_view Tree::symlink_target(uint32_t id) const {
  const Node& n = nodes_[id];
  return std::string_view(arena_).substr(n.first_child, static_cast<size_t>(n.size));
}

bool Tree::is_dir(uint32_t id) const { return S_ISDIR(mode(id)); }

std::optional<uint32_t> Tree::lookup(uint32_t dir, std::string_view name) const {
  const Node& d = nodes_[dir];
  if (!is_dir(dir)) return std::nullopt;
  uint32_t lo = d.first_child, hi = d.first_child + d.nchildren;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    int c = this->name(mid).compare(name);
    if (c == 0) return mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return std::nullopt;
}

Tree::FileState Tree::file_state(uint32_t id) const {
  const Node& n = nodes_[id];
  const bool has_dims = id < dims_.size();
  return versions_lock_->read(id, [&] {
    FileState s{{relaxed_load(n.size), relaxed_load(n.mtime_ns), relaxed_load(n.identity)},
                {},
                relaxed_load(n.mode),
                owners_->at(relaxed_load(n.owner))};
    if (has_dims) s.dims = {relaxed_load(dims_[id].width), relaxed_load(dims_[id].height)};
    return s;
  });
}

void Tree::set_file_state(uint32_t id, const FileState& s) {
  versions_lock_->write(id, [&] { store_file_state(id, s); });
}

bool Tree::replace_file_state(uint32_t id, const FileVersion& expected, const FileState& s) {
  bool replaced = false;
  versions_lock_->write(id, [&] {
    const Node& n = nodes_[id];
    if (FileVersion{relaxed_load(n.size), relaxed_load(n.mtime_ns), relaxed_load(n.identity)} != expected) return;
    store_file_state(id, s);
    replaced = true;
  });
  return replaced;
}

// Under the file's write lock.
void Tree::store_file_state(uint32_t id, const FileState& s) {
  Node& n = nodes_[id];
  relaxed_store(n.size, s.version.size);
  relaxed_store(n.mtime_ns, s.version.mtime_ns);
  relaxed_store(n.identity, s.version.identity);
  relaxed_store(n.mode, (n.mode & S_IFMT) | (s.mode & ~S_IFMT));
  relaxed_store(n.owner, owners_->intern(s.owner));  // interning is serialized by the write lock
  store_dims(id, s.dims);
}

// Under the file's write lock.
void Tree::store_dims(uint32_t id, ImageDims d) {
  if (id >= dims_.size()) return;
  const ImageDims old{relaxed_load(dims_[id].width), relaxed_load(dims_[id].height)};
  relaxed_store(dims_[id].width, d.width);
  relaxed_store(dims_[id].height, d.height);
  // Writers of different stripes run at once: the counts need atomic updates.
  if (old.is_image() != d.is_image())
    std::atomic_ref<uint64_t>(image_count_).fetch_add(d.is_image() ? 1 : uint64_t(-1));
  if (old.known() != d.known())
    std::atomic_ref<uint64_t>(unprobed_count_).fetch_add(d.known() ? uint64_t(-1) : 1);
}

uint64_t Tree::memory_bytes() const {
  return nodes_.capacity() * sizeof(Node) + arena_.capacity() + dims_.capacity() * sizeof(ImageDims) +
         owners_->memory_bytes();
}

void Tree::count_files() {
  file_count_ =
      static_cast<uint64_t>(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return S_ISREG(n.mode); }));
}

// One file's header, recorded while readers run (the HeaderProber, the store's first chunks):
// under the file's seqlock stripe like every other part of its state, and only for the version
// it was read from.
void Tree::set_dims(uint32_t id, const FileVersion& of, ImageDims d) {
  if (id >= dims_.size()) return;
  Node& n = nodes_[id];
  versions_lock_->write(id, [&] {
    const FileVersion now{relaxed_load(n.size), relaxed_load(n.mtime_ns), relaxed_load(n.identity)};
    if (now == of) store_dims(id, d);
  });
}

bool Tree::probed() const { return dims_.size() == nodes_.size() && unprobed_count() == 0; }

uint64_t Tree::unprobed_count() const {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(unprobed_count_)).load(std::memory_order_relaxed);
}

void Tree::set_all_dims(std::vector<ImageDims> d) {
  dims_ = std::move(d);
  image_count_ =
      static_cast<uint64_t>(std::count_if(dims_.begin(), dims_.end(), [](const ImageDims& x) { return x.is_image(); }));
  unprobed_count_ =
      static_cast<uint64_t>(std::count_if(dims_.begin(), dims_.end(), [](const ImageDims& x) { return !x.known(); }));
}

}  // namespace prepfs
