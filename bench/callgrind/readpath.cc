// Instruction counts of the sample read path, for valgrind --tool=callgrind (exactly repeatable on
// a noisy machine, unlike wall time). A Daemon over DATASET_DIR (ram 1G, no SSD, cpu=1,
// partition=fixed:100/0/0, pinned in main() below so that no re-plan moves samples) serves:
//   cold_augmented_opens   one augmented/ open (+ release) of every image, nothing cached yet
//   fill_raw               one 128 KiB raw/ read of every image (admits the raw chunks)
//   warm_raw_reads         ten more rounds of the same reads: each a RAM hit
// Run each under --toggle-collect=<function> (bench/callgrind/README.md has the commands).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "prepfs/common/options.h"
#include "prepfs/core/data_fs.h"
#include "prepfs/daemon/daemon.h"
#include "prepfs/index/tree.h"

using namespace prepfs;

namespace {

std::vector<uint32_t> images;
std::vector<uint64_t> raw_inos;  // of the images in raw/, found by lookups before measuring

__attribute__((noinline)) void cold_augmented_opens(Filesystem& aug) {
  for (uint32_t id : images) {
    OpenReply r = aug.open(id + 1, 0);
    aug.release(id + 1, r.fh);
  }
}

__attribute__((noinline)) void fill_raw(Filesystem& fs) {
  for (uint64_t ino : raw_inos)
    if (fs.read(ino, 0, 0, 131072).empty()) abort();
}

__attribute__((noinline)) void warm_raw_reads(Filesystem& fs, int rounds) {
  for (int k = 0; k < rounds; k++)
    for (uint64_t ino : raw_inos)
      if (fs.read(ino, 0, 0, 131072).empty()) abort();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DATASET_DIR CACHE_DIR\n", argv[0]);
    return 2;
  }
  Options o;
  o.source = argv[1];
  o.mountpoint = "/nonexistent";
  o.ssd_dir = argv[2];
  o.ram_bytes = 1ull << 30;
  o.ssd_bytes = 0;
  o.cpu = 1;
  o.log_level = "warn";
  // Pinned: under valgrind the run is slow enough for the profiler to tick and re-plan, which
  // would move samples between forms in the middle of a measurement.
  apply_option(o, "partition", "fixed:100/0/0", true);
  finalize_options(o);
  Daemon d(o);
  for (uint32_t id = 0; id < d.tree().size(); id++)
    if (d.tree().dims(id).is_image()) images.push_back(id);
  for (uint32_t id : images) {
    uint64_t ino = d.main_fs().lookup(1, "raw").ino;
    const std::string path = d.tree().path(id);
    for (size_t pos = 0; pos < path.size();) {
      size_t slash = path.find('/', pos);
      if (slash == std::string::npos) slash = path.size();
      ino = d.main_fs().lookup(ino, path.substr(pos, slash - pos)).ino;
      pos = slash + 1;
    }
    raw_inos.push_back(ino);
  }
  std::fprintf(stderr, "%zu images\n", images.size());
  cold_augmented_opens(d.augmented_fs());
  fill_raw(d.main_fs());
  warm_raw_reads(d.main_fs(), 10);
  return 0;
}
