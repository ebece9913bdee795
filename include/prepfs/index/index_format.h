// The bytes of the persisted metadata index (tree_store.h says when it is used), as pure
// functions with no file system: tree_store.cc reads and writes the file, and the fuzzer
// (tests/fuzz/) drives decode_index() directly.
//
// Layout, in this machine's byte order (the index never leaves the machine that wrote it):
//   Header | node_count Nodes | the name arena | dir_count DirRecords | node_count ImageDims |
//   owner_count Owners | XXH3-64 of everything before it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "prepfs/index/tree.h"
#include "prepfs/source/source.h"

namespace prepfs {

struct IndexHeader {
  char magic[8];  // "PREPFSI\0"
  uint32_t version;
  uint32_t owner_count;
  uint64_t source_hash;  // index_source_hash()
  uint64_t node_count;
  uint64_t arena_size;
  uint64_t dir_count;
};
static_assert(sizeof(IndexHeader) == 48);

// The fingerprint a directory had when the index was written.
struct DirRecord {
  uint32_t node;
  uint32_t reserved;
  DirFingerprint fp;
};

struct StoredIndex {
  Tree tree;                    // with the image dimensions of every node
  std::vector<DirRecord> dirs;  // empty when the source has no fingerprints (object stores)
};

// What ties an index to its source: XXH3-64 of Source::identity().
uint64_t index_source_hash(const Source& source);

// The index of tree; asks source for every directory's fingerprint.
std::string encode_index(const Tree& tree, Source& source);

// Checks integrity and owner and returns the stored index; says nothing about freshness. Throws
// Error(EIO) saying what is wrong when the bytes are not an index of the source whose hash is
// source_hash. The checksum only catches accidents (anyone who can write ssd_dir can recompute
// it), so past it nothing is trusted: every count is checked against the bytes there are before
// anything is allocated, and the tree must pass Tree::from_parts (no cycle, every id, name and
// range in bounds), so a damaged index can be refused but never loop, crash or fill memory.
StoredIndex decode_index(std::string_view bytes, uint64_t source_hash);

// The size in bytes of the index whose header is `header` (its first sizeof(IndexHeader) bytes),
// or 0 when they are no header of this format or name sizes past 2^64. Lets the reader refuse a
// file whose size is not its header's before it allocates for it.
uint64_t index_file_size(std::string_view header);

}  // namespace prepfs
