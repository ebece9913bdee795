// libFuzzer target: the persisted metadata index as read back from ssd_dir (decode_index).
//
// The input is an index file without its last 8 bytes: the harness appends the right XXH3-64
// and takes the source hash from the header, so the fuzzer spends its time on the structure
// behind those two gates, as a file rewritten by anyone who can write ssd_dir would. Whatever
// decode_index accepts is then walked the way the daemon walks a tree (paths, lookups, symlink
// targets, image dimensions), so an accepted index that would loop or read out of bounds is a
// finding too. A rejection must be Error(EIO).
#include <sys/stat.h>
#include <xxhash.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "prepfs/common/error.h"
#include "prepfs/index/index_format.h"

namespace {

constexpr size_t kSourceHashOffset = offsetof(prepfs::IndexHeader, source_hash);

// A source with fingerprints and nothing else, to save an accepted index again.
class FingerprintSource : public prepfs::Source {
 public:
  std::string identity() const override { return "fuzz:index"; }
  void scan(const Visitor&) override { __builtin_trap(); }
  // The save checks each directory against the source as it is now: gone, here (its fingerprint
  // then matches nothing, and the round trip below compares the nodes only).
  prepfs::SourceStat stat(const std::string&) override { throw prepfs::Error(ENOENT, "not in a fuzzed index"); }
  std::optional<prepfs::DirFingerprint> dir_fingerprint(const std::string&) override {
    return prepfs::DirFingerprint{};
  }
  size_t read(const std::string&, const prepfs::FileVersion&, uint64_t, void*, size_t) override { __builtin_trap(); }
};

void walk(const prepfs::StoredIndex& index) {
  const prepfs::Tree& t = index.tree;
  for (uint32_t id = 0; id < t.size(); id++) {
    const std::string path = t.path(id);
    const prepfs::Node& n = t.node(id);
    if (id != prepfs::Tree::kRoot && t.lookup(n.parent, t.name(id)) != id) __builtin_trap();
    if (S_ISLNK(n.mode)) (void)t.symlink_target(id);
    (void)t.dims(id);
    (void)t.version(id);
  }
  for (const prepfs::DirRecord& r : index.dirs) (void)t.path(r.node);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  std::string file(reinterpret_cast<const char*>(bytes), size);
  uint64_t source_hash = 0;
  if (size >= kSourceHashOffset + 8) std::memcpy(&source_hash, bytes + kSourceHashOffset, 8);
  const uint64_t sum = XXH3_64bits(file.data(), file.size());
  file.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  std::optional<prepfs::StoredIndex> index;
  try {
    index = prepfs::decode_index(file, source_hash);
  } catch (const prepfs::Error& e) {
    if (e.err() != EIO) __builtin_trap();
    return 0;
  }
  walk(*index);
  // The reader refuses a file whose size is not its header's before decoding it: whatever
  // decodes must have exactly that size, or good indexes would be refused.
  if (prepfs::index_file_size(file) != file.size()) __builtin_trap();
  // What was accepted must survive a save and a reload unchanged (the next mount's path); a
  // refusal here escapes as an exception, which libFuzzer reports.
  FingerprintSource source;
  const prepfs::Tree& t = index->tree;
  const prepfs::Tree again =
      prepfs::decode_index(prepfs::encode_index(t, source), prepfs::index_source_hash(source)).tree;
  if (again.arena() != t.arena() || again.all_dims().size() != t.all_dims().size() ||
      std::memcmp(again.nodes().data(), t.nodes().data(), t.size() * sizeof(prepfs::Node)) != 0)
    __builtin_trap();
  return 0;
}
