// The one owner of the sample read path. A request resolves its sample once (node, path,
// version, placement slot); the store then builds the cache keys, cuts raw bytes into chunks of
// one size, decides admission from the slot, and fills misses: raw chunks from the source,
// decoded pixels and augmented variants through the Renderer from the cheapest form at hand.
// Nothing above it builds a key, knows the chunk size or talks to a tier.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "prepfs/cache/tier_manager.h"
#include "prepfs/common/forms.h"
#include "prepfs/index/tree.h"
#include "prepfs/partition/job_knowledge.h"
#include "prepfs/partition/placer.h"
#include "prepfs/source/source.h"
#include "prepfs/store/renderer.h"
#include "prepfs/store/sample.h"
#include "prepfs/store/staging.h"

namespace prepfs {

struct StoreConfig {
  uint64_t chunk_size = 1ull << 20;  // raw bytes are cached in chunks of this size (part of the key)
  // Who chooses which samples each (form, tier) keeps (the plan always sizes them): the
  // placement's hash intervals, or the eviction policy when it ranks samples (belady,
  // importance), or the policy while some job has a published future (auto).
  enum class Members { placement, policy, policy_with_order };
  Members members = Members::placement;
};

// What a render ahead did (SampleStore::render_ahead).
enum class AheadOutcome {
  rendered,  // rendered and staged for the open (the staging counts it used or wasted)
  late,      // rendered, but its open came meanwhile (and joined the render): not staged
  wasted,    // rendered, but the staging had no room left by then
  ready,     // not rendered: cached or staged already, or an open is rendering it
  skipped,   // not rendered: no room left for renders ahead, transform memory in use by a reader
             // (work ahead gives way), or not a sample
  no_inputs, // not rendered: its inputs were not in memory
};

// What the store knows of the jobs and keeps for them; both may be null (no published orders).
struct JobSupport {
  JobKnowledge* knowledge = nullptr;  // reads are noted here (next uses, cursors)
  Staging* staging = nullptr;         // prefetched entries, until read
  PrefetchCounters* counters = nullptr;
};

class SampleStore {
 public:
  // tree: headers read on the way (a first mount probes lazily) record the file's dimensions.
  SampleStore(Source& source, Tree& tree, TierManager& cache, const Placer& placer, Renderer& renderer,
              StoreConfig cfg = {}, JobSupport jobs = {});

  Sample resolve(uint32_t node) const;

  // Chunk `index` of the raw bytes (the last chunk may be shorter). `by`: work ahead reads its
  // inputs uncounted (see TakenBy).
  ChunkRef raw(const Sample& s, uint64_t index, TakenBy by = TakenBy::read);
  // The decoded file: header + pixels (EIO for a file that is not a sample). With a held slot,
  // null while another caller decodes it (that decode may be waiting for the held slot).
  ChunkRef decoded(const Sample& s, SlotUse slot = SlotUse::take);
  // Variant `variant` of the augmented file, of s with its header known (with_header). On its
  // last serve the variant is never admitted to a tier (and a cached copy is dropped): nobody will
  // ask for it again.
  ChunkRef augmented(const Sample& s, uint32_t variant, bool last_serve);
  // The variant again, for a handle that did not keep the bytes its open got (core/augmented_fs.h):
  // s as that open rendered it (header known). A copy a tier or the staging holds serves, left in
  // place; otherwise it is rendered outside the cache: nothing admitted, taken or counted as a
  // request, only the render itself.
  ChunkRef rerender(const Sample& s, uint32_t variant);
  // Drops every cached entry of one form of a sample: its raw chunks, its decoded pixels, or
  // augmented variants `variant` and the one before (the partition moved it elsewhere).
  void forget(const Sample& s, Form form, uint32_t variant);

  // A job read this sample (through a view): its pending access is consumed, and the cache
  // re-ranks its entries by their new next use.
  void note_read(const Sample& s);

  // Fetches or decodes ahead what a read of `form` of s will need, keeping it where the
  // placement says, else staged until the read takes it. A decode is done only when
  // `may_transform` (a CPU slot is free); otherwise, and for augmented/ (whose variant
  // prefetch_variant renders), the raw bytes are fetched. Returns the bytes fetched or decoded (0
  // when everything was at hand already).
  uint64_t prefetch(const Sample& s, Form form, bool may_transform);
  // Renders variant `variant` of s ahead of the open a published order announces, and stages it
  // for that open: in the cpu slot the caller holds (Renderer::idle_slot()), only from inputs
  // already in memory (the caller fetches them first). `upcoming()` tells whether the file's next
  // open still gets that variant (checked after the render).
  struct Early {
    AheadOutcome outcome;
    uint64_t bytes = 0;  // staged for the open (0 unless rendered and still wanted)
  };
  Early prefetch_variant(const Sample& s, uint32_t variant, const std::function<bool()>& upcoming);
  // Whether the decoded pixels or every raw chunk of s are in memory (a tier or the staging).
  bool inputs_at_hand(const Sample& s, std::optional<uint32_t> variant = std::nullopt);
  // Reads the header of a file whose dimensions are not known yet (the HeaderProber's work): its
  // first chunk, which is then kept where the placement says, or staged for the read that
  // usually follows. Records the dimensions in the index.
  void probe_head(const Sample& s);
  // s itself when its header is known; otherwise s with its header read now, as the file is now
  // (EIO when it cannot be read). A lazy first mount's open renders, and records, this one sample.
  Sample with_header(const Sample& s) { return s.dims.known() ? s : probed(s, false); }
  // The image dimensions from the first raw chunk another node published to the shared tier
  // (nullopt when it holds none): a mount's first header reads then need not touch the source.
  std::optional<ImageDims> dims_from_shared(const Sample& s);
  // Whether a read of `form` of s finds everything it needs without the source or a transform
  // (for augmented/: variant `variant` itself, cached or staged).
  bool ready(const Sample& s, Form form, uint32_t variant);
  // Renders variant `variant` of s ahead of its open and stages it (render ahead, no order
  // published), in the cpu slot the caller holds (Renderer::idle_slot()). Only from inputs already
  // in memory, and only into the staging's free room for renders ahead. `upcoming()` tells
  // whether the file's next open still gets that variant (checked after the render).
  AheadOutcome render_ahead(const Sample& s, uint32_t variant, const std::function<bool()>& upcoming);

  // Where a fill of `form` of s may be kept: its slot's tier when the slot holds that form (and
  // RAM for the variant of a sample kept decoded there, when the plan says so:
  // Placer::variant_beside_pixels), nowhere when the slot
  // holds another form, everywhere for files that are not samples.
  Admission admission(const Sample& s, Form form) const;

  uint64_t chunk_size() const { return cfg_.chunk_size; }
  uint64_t chunks(const Sample& s) const { return (s.version.size + cfg_.chunk_size - 1) / cfg_.chunk_size; }
  const SampleShapes& shapes() const { return renderer_.shapes(); }
  const Tree& tree() const { return tree_; }

 private:
  Sample probed(const Sample& s, bool same_version);  // s with its header read (see the .cc)
  CacheKey key(const Sample& s, Form form, uint32_t variant, uint64_t chunk) const;
  ChunkRef fetch_chunk(const Sample& s, uint64_t index);  // from the source, checked
  JpegBytes jpeg(const Sample& s, TakenBy by);
  ChunkRef render_augmented(const Sample& s, uint32_t variant, SlotUse slot = SlotUse::take);
  void note_head(const Sample& s, const ChunkRef& first_chunk);  // records dims when they were unknown
  Admission admit(const Sample& s, Form form) const;
  void unstage(const CacheKey& key, const Admission& where, TakenBy by);             // admission(), or the policy's membership
  // A variant rendered before its open and staged: prefetch_variant (a published order; the
  // prefetch window's room, a read meanwhile counts as late) and render_ahead (no order; the
  // staging's room for renders ahead) differ only in whose room they take.
  enum class EarlyRoom { prefetch, ahead };
  Early render_before_open(const Sample& s, uint32_t variant, const std::function<bool()>& upcoming, EarlyRoom room);
  bool variant_beside_pixels(const Slot& slot, Form form) const;  // Placer::variant_beside_pixels
  // A fill: a staged entry when the prefetcher made one, else make().
  template <class Make>
  ChunkRef staged_or(const CacheKey& key, TakenBy by, Make&& make);
  void note_if_late(const CacheKey& key);
  // Stages c under key (put_ahead: within the room for work ahead) unless s's file changed since s
  // was resolved. refused: no room, nothing staged (nothing counted); dropped: staged, then dropped
  // for the change (the staging counted it wasted, so a caller must not count it again).
  enum class Staged { kept, refused, dropped };
  Staged stage_if_current(const Sample& s, const CacheKey& key, const ChunkRef& c, bool ahead);
  // The prefetcher's get_or_fill: where the placement keeps it, else staged.
  template <class Make>
  uint64_t prefetch_entry(const Sample& s, const CacheKey& key, Form form, Make&& make);
  // Marks key as being prefetched while it lives (a read of it meanwhile counts as late).
  class Prefetching;

  Source& source_;
  Tree& tree_;
  TierManager& cache_;
  const Placer& placer_;
  Renderer& renderer_;
  StoreConfig cfg_;
  JobSupport jobs_;
  std::mutex prefetching_mu_;
  std::unordered_map<CacheKey, int, CacheKeyHash> prefetching_;  // keys the prefetcher is filling
  std::atomic<int> prefetching_count_{0};
};

}  // namespace prepfs
