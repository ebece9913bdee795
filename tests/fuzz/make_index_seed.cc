// Writes the seed of the index fuzzer: the index of a small tree (directories, files, images,
// a symlink, an empty directory) exactly as save_tree encodes it, minus the trailing checksum
// that fuzz_index appends itself. Built and run at build time, so the seed always has the
// current format.
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "prepfs/index/index_format.h"

namespace {

class SmallSource : public prepfs::Source {
 public:
  std::string identity() const override { return "dir:/fuzz/seed"; }
  void scan(const Visitor& visit) override {
    const prepfs::SourceStat dir{S_IFDIR | 0755, 0, 1'000'000'000, {}};
    visit("", dir);
    visit("train", dir);
    visit("train/cat", dir);
    visit("train/cat/1.jpg", {S_IFREG | 0644, 4321, 2'000'000'000, {}});
    visit("train/cat/2.jpg", {S_IFREG | 0644, 1234, 3'000'000'000, {}});
    visit("train/dog", dir);
    visit("train/dog/a.jpg", {S_IFREG | 0600, 999, 4'000'000'000, {}});
    visit("empty", dir);
    visit("README", {S_IFREG | 0644, 12, 5'000'000'000, {}});
    visit("latest", {S_IFLNK | 0777, 5, 6'000'000'000, "train"});
  }
  // Every directory as scanned (the save records a fingerprint only for one unchanged since).
  prepfs::SourceStat stat(const std::string&) override { return {S_IFDIR | 0755, 0, 1'000'000'000, {}}; }
  std::optional<prepfs::DirFingerprint> dir_fingerprint(const std::string& rel) override {
    return prepfs::DirFingerprint{1'000'000'000, 1'000'000'001, 100 + rel.size()};
  }
  size_t read(const std::string&, const prepfs::FileVersion&, uint64_t, void*, size_t) override { return 0; }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT\n", argv[0]);
    return 2;
  }
  SmallSource source;
  prepfs::Tree tree = prepfs::Tree::scan(source);
  std::vector<prepfs::ImageDims> dims(tree.size());
  for (uint32_t id = 0; id < tree.size(); id++)
    if (tree.name(id).ends_with(".jpg")) dims[id] = {640 + id, 480};
  tree.set_all_dims(std::move(dims));
  std::string bytes = prepfs::encode_index(tree, source);
  bytes.resize(bytes.size() - 8);  // fuzz_index appends the checksum of whatever it is given
  FILE* f = std::fopen(argv[1], "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  return 0;
}
