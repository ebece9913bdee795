// The persisted metadata index: a remount of an unchanged source loads the tree from the cache
// directory instead of listing every directory again. "Unchanged" is decided per directory by a
// fingerprint (mtime, ctime, inode): one stat per directory instead of a listing plus a stat per
// file. A file rewritten in place keeps its directory's fingerprint: while mounted, the daemon
// sees the change at its next source read (or metadata_ttl's revalidation) and marks the index
// stale; while no daemon runs, only metadata_ttl catches it, since SSD and shared-tier hits never
// read the source (docs/ARCHITECTURE.md, "Metadata").
#pragma once

#include <optional>
#include <string>

#include "prepfs/index/tree.h"
#include "prepfs/source/source.h"

namespace prepfs {

struct TreeLoad {
  Tree tree;
  bool from_index = false;  // true when the persisted index was reused
  // An intact index of this source was there, reused or not (stale, a directory changed): a
  // restart, whose caches hold what the last mount chose.
  bool restarted = false;
};

// Loads path if it exists, is intact, belongs to this source and every directory's fingerprint
// still matches; otherwise scans the source and writes a fresh index to path (best effort).
// With probe=false the image headers that the previous index does not know are left unprobed
// (read later, while serving: store/header_prober.h) and the mount does not wait for them.
TreeLoad load_or_scan_tree(Source& source, const std::string& path, bool probe = true);

// Writes the index atomically (temp file + rename). Throws Error on failure.
void save_tree(const Tree& tree, Source& source, const std::string& path);

// Returns nullopt (and says why in the log at debug level) when the file cannot be reused.
std::optional<Tree> load_tree(Source& source, const std::string& path);

// Says that files changed under the mount that used this index: directory fingerprints do not see
// a file rewritten in place (or chmod-ed: a new ctime, a new version), so the next mount must
// list the source again instead of reusing the index. The stale index still lends the headers of
// files whose version it holds unchanged. Cleared by the next save_tree().
void mark_index_stale(const std::string& path);

}  // namespace prepfs
