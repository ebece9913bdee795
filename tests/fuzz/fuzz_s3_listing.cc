// libFuzzer target: one ListObjectsV2 page as an S3 server might answer it, through the XML
// parser, then its keys through the key-to-tree rules and Tree::scan, as S3Source::scan does.
//
// Besides crashes, it checks the promises of s3_keys.h: whatever the keys, the tree has no "."
// or ".." or empty segment, no duplicate path, and every directory comes before its children
// (Tree::scan throws otherwise, which is a finding here). Malformed XML must throw Error(EIO).
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "prepfs/common/error.h"
#include "prepfs/index/tree.h"
#include "prepfs/source/s3_keys.h"
#include "prepfs/source/s3_xml.h"

namespace {

// Serves a finished key tree to Tree::scan; nothing else is ever called.
class ListedSource : public prepfs::Source {
 public:
  explicit ListedSource(std::vector<prepfs::s3::TreeEntry> entries) : entries_(std::move(entries)) {}
  std::string identity() const override { return "fuzz:s3"; }
  void scan(const Visitor& visit) override {
    for (const auto& e : entries_) visit(e.path, e.st);
  }
  prepfs::SourceStat stat(const std::string&) override { __builtin_trap(); }
  std::optional<prepfs::DirFingerprint> dir_fingerprint(const std::string&) override { return std::nullopt; }
  size_t read(const std::string&, const prepfs::FileVersion&, uint64_t, void*, size_t) override { __builtin_trap(); }

 private:
  std::vector<prepfs::s3::TreeEntry> entries_;
};

bool safe_path(std::string_view p) {
  if (p.empty()) return true;  // the root
  for (size_t start = 0;;) {
    size_t end = p.find('/', start);
    std::string_view seg = p.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (seg.empty() || seg == "." || seg == ".." || seg.size() > 255 || seg.find('\0') != std::string_view::npos)
      return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

void check_tree(const prepfs::s3::ListPage& page) {
  prepfs::s3::KeyTree keys;
  for (const auto& o : page.objects) keys.add(o.key, o.size, o.last_modified_ns);
  std::vector<prepfs::s3::TreeEntry> entries = keys.finish();
  if (entries.empty() || !entries[0].path.empty()) __builtin_trap();
  for (size_t i = 0; i < entries.size(); i++) {
    if (!safe_path(entries[i].path)) __builtin_trap();
    if (i > 1 && !(entries[i - 1].path < entries[i].path)) __builtin_trap();
  }
  ListedSource source(std::move(entries));
  prepfs::Tree tree = prepfs::Tree::scan(source);  // throws (a finding) on a child before its directory
  for (uint32_t id = 0; id < tree.size(); id++)
    if (id != prepfs::Tree::kRoot && !tree.lookup(tree.node(id).parent, tree.name(id))) __builtin_trap();
}

}  // namespace

// The first skipped key of each reason is logged: millions of runs would flood the test log.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view xml(reinterpret_cast<const char*>(bytes), size);
  (void)prepfs::s3::parse_error_body(xml);  // noexcept by contract
  prepfs::s3::ListPage page;
  try {
    page = prepfs::s3::parse_list_objects_v2(xml);
  } catch (const prepfs::Error& e) {
    if (e.err() != EIO) __builtin_trap();
    return 0;
  }
  check_tree(page);
  return 0;
}
