#include "prepfs/store/sample_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "prepfs/cache/fill_withdrawn.h"
#include "prepfs/common/error.h"
#include "prepfs/index/image_probe.h"

namespace prepfs {

SampleStore::SampleStore(Source& source, Tree& tree, TierManager& cache, const Placer& placer, Renderer& renderer,
                         StoreConfig cfg, JobSupport jobs)
    : source_(source), tree_(tree), cache_(cache), placer_(placer), renderer_(renderer), cfg_(cfg), jobs_(jobs) {}

Sample SampleStore::resolve(uint32_t node) const {
  Sample s;
  s.node = node;
  s.path = tree_.path(node);
  const Tree::FileState state = tree_.file_state(node);  // one version and its dimensions
  s.version = state.version;
  s.dims = state.dims;
  s.is_sample = S_ISREG(tree_.mode(node)) && shapes().maybe_sample(s.dims);
  if (s.is_sample) {
    const Placer::Placement p = placer_.place(Placer::sample_hash(s.path));
    s.placed = p.active;
    s.slot = p.slot;
    s.held = p.held;
  } else {
    s.placed = placer_.active();
  }
  return s;
}

Admission SampleStore::admission(const Sample& s, Form form) const {
  if (!s.placed || !s.is_sample) return Admission{};
  if (s.slot && variant_beside_pixels(*s.slot, form)) return Admission{true, false};
  if (!s.slot || s.slot->form != form) return Admission::none();
  return Admission{s.slot->tier == Tier::ram, s.slot->tier == Tier::ssd};
}

// A variant kept beside its sample's decoded pixels in RAM, when the enforced plan gave it room
// (the planner publishes that rule through the placer: one source, model::Inputs).
bool SampleStore::variant_beside_pixels(const Slot& slot, Form form) const {
  return form == Form::augmented && placer_.variant_beside_pixels() && slot.form == Form::decoded &&
         slot.tier == Tier::ram;
}

Admission SampleStore::admit(const Sample& s, Form form) const {
  const bool policy =
      cfg_.members == StoreConfig::Members::policy ||
      (cfg_.members == StoreConfig::Members::policy_with_order && jobs_.knowledge && jobs_.knowledge->has_future());
  if (!policy || !s.placed || !s.is_sample) return admission(s, form);
  // The plan sizes each (form, tier); the ranking policy picks its members as they are read.
  const auto held = [&](Form f, Tier t) { return (s.held >> (index_of(f) + kForms * index_of(t))) & 1; };
  const bool beside = variant_beside_pixels(Slot{Form::decoded, Tier::ram}, form) && held(Form::decoded, Tier::ram);
  return Admission{bool(held(form, Tier::ram)) || beside, bool(held(form, Tier::ssd))};
}

template <class Make>
ChunkRef SampleStore::staged_or(const CacheKey& key, TakenBy by, Make&& make) {
  if (jobs_.staging) {
    if (ChunkRef c = jobs_.staging->take(key, by)) return c;  // counted there (a prefetch hit, a render ahead used)
  }
  return make();
}

void SampleStore::note_if_late(const CacheKey& key) {
  if (prefetching_count_.load(std::memory_order_relaxed) == 0 || !jobs_.counters) return;
  std::lock_guard lock(prefetching_mu_);
  if (prefetching_.count(key)) bump(jobs_.counters->late);
}

void SampleStore::note_read(const Sample& s) {
  if (jobs_.knowledge && jobs_.knowledge->note_access(s.node)) cache_.sample_changed(s.node);
}

CacheKey SampleStore::key(const Sample& s, Form form, uint32_t variant, uint64_t chunk) const {
  KeyFields k;
  k.path = s.path;
  k.version = s.version;
  k.form = form;
  k.variant = variant;
  k.chunk = chunk;
  switch (form) {
    case Form::raw: k.chunk_size = cfg_.chunk_size; break;
    case Form::decoded: k.pipeline_hash = renderer_.decoded_pipeline_hash(); break;
    case Form::augmented: k.pipeline_hash = renderer_.augmented_pipeline_hash(); break;
  }
  return make_key(k);
}

ChunkRef SampleStore::fetch_chunk(const Sample& s, uint64_t index) {
  const uint64_t start = index * cfg_.chunk_size;
  const size_t len = static_cast<size_t>(std::min<uint64_t>(cfg_.chunk_size, s.version.size - start));
  auto fresh = Chunk::allocate(len);
  if (source_.read(s.path, s.version, start, fresh->mutable_data(), len) != len)
    throw Error(EIO, "source file " + s.path + " is shorter than indexed");
  return fresh;
}

// Work in a held cpu slot is work ahead: what it takes from the staging is an input.
static TakenBy taken_by(SlotUse slot) { return slot == SlotUse::held ? TakenBy::work_ahead : TakenBy::read; }

ChunkRef SampleStore::raw(const Sample& s, uint64_t index, TakenBy by) {
  if (index * cfg_.chunk_size >= s.version.size && !(index == 0 && s.version.size == 0))
    throw Error(EINVAL, "chunk " + std::to_string(index) + " is past the end of " + s.path);
  const size_t len = static_cast<size_t>(std::min<uint64_t>(cfg_.chunk_size, s.version.size - index * cfg_.chunk_size));
  const CacheKey k = key(s, Form::raw, 0, index);
  if (by == TakenBy::read) note_if_late(k);
  const Admission where = admit(s, Form::raw);
  ChunkRef c = cache_.get_or_fill(
      k, Form::raw, [&] { return staged_or(k, by, [&] { return fetch_chunk(s, index); }); }, where, s.node);
  unstage(k, where, by);
  if (c->size() != len) throw Error(EIO, "cached chunk of " + s.path + " has the wrong size");
  if (index == 0 && !s.dims.known()) note_head(s, c);
  return c;
}

void SampleStore::note_head(const Sample& s, const ChunkRef& c) {
  const std::span<const uint8_t> head(reinterpret_cast<const uint8_t*>(c->data()), c->size());
  if (std::optional<ImageDims> d = dims_from_head(head, s.version.size)) tree_.set_dims(s.node, s.version, *d);
}

void SampleStore::probe_head(const Sample& s) {
  if (s.dims.known() || !S_ISREG(tree_.mode(s.node))) return;
  const CacheKey k = key(s, Form::raw, 0, 0);
  ChunkRef c;
  if (s.version.size > 0)
    c = cache_.get_or_fill(
        // Among the recent fills at once: a read racing this probe finds it there, not at the source.
        // A staged chunk stays staged for its read (peeked, not taken).
        k, Form::raw,
        [&] {
          ChunkRef staged = jobs_.staging ? jobs_.staging->peek(k) : nullptr;
          return staged ? staged : fetch_chunk(s, 0);
        },
        Admission::none(), s.node);
  std::optional<ImageDims> d;
  if (c) d = dims_from_head({reinterpret_cast<const uint8_t*>(c->data()), c->size()}, s.version.size);
  if (!d) d = s.version.size == 0 ? ImageDims{} : probe_image(source_, s.path, s.version);  // header past chunk 0
  tree_.set_dims(s.node, s.version, *d);
  if (!c) return;
  // Now that the index knows what the file is, keep its first chunk as the placement says (an
  // image's: a read usually follows; a file that is no image is not kept for one).
  const Sample known = resolve(s.node);
  if (!known.is_sample || known.version != s.version) return;  // changed meanwhile: chunk 0 is stale
  const Admission where = admit(known, Form::raw);
  if (where.any() && known.placed) cache_.keep(k, c, Form::raw, where, s.node);
  if (!jobs_.staging) return;
  // Not kept by a tier (not placed there, or its form is at its quota): staged for the read (put
  // keeps a copy staged already). Kept by one: a staged copy would only wait to be wasted.
  if (!cache_.in_tier(k))
    jobs_.staging->put(k, c, s.node);
  else
    jobs_.staging->take(k, TakenBy::work_ahead);
}

std::optional<ImageDims> SampleStore::dims_from_shared(const Sample& s) {
  if (!cache_.shares(Form::raw) || s.version.size == 0) return std::nullopt;
  const ChunkRef c = cache_.shared()->get(key(s, Form::raw, 0, 0), Form::raw);
  if (!c) return std::nullopt;
  return dims_from_head({reinterpret_cast<const uint8_t*>(c->data()), c->size()}, s.version.size);
}

// The JPEG of a render: raw chunks from the tiers where cached, else from the source, kept only
// where the placement puts this sample's raw form (what to cache is the partition's decision,
// not a side effect of rendering).
JpegBytes SampleStore::jpeg(const Sample& s, TakenBy by) {
  JpegBytes out;
  const uint64_t n = chunks(s);
  if (n == 1) {
    out.hold = raw(s, 0, by);
    out.bytes = {reinterpret_cast<const uint8_t*>(out.hold->data()), out.hold->size()};
    return out;
  }
  out.owned.resize(s.version.size);
  for (uint64_t i = 0; i < n; i++) {
    ChunkRef c = raw(s, i, by);
    std::memcpy(out.owned.data() + i * cfg_.chunk_size, c->data(), c->size());
  }
  out.bytes = out.owned;
  return out;
}

// s once its header is read (a lazy first mount had not read it yet). `same_version`: the version
// s names, or EIO. A decoded/ read needs that (its inode names a version, and a revalidation while
// the header was read must not hand it the new version's bytes); an augmented/ open does not (its
// inode names no version: it serves whatever the file is now).
Sample SampleStore::probed(const Sample& s, bool same_version) {
  probe_head(s);
  const Sample known = resolve(s.node);
  if (same_version && known.version != s.version)
    throw Error(EIO, "source file " + s.path + " changed while its header was read: open it again");
  if (!known.dims.known()) throw Error(EIO, s.path + ": its header could not be read");
  return known;
}

ChunkRef SampleStore::decoded(const Sample& s, SlotUse slot) {
  if (!s.dims.known()) {  // a lazy first mount has not read this header yet: read it now
    const Sample known = probed(s, true);
    return decoded(known, slot);
  }
  renderer_.check_renderable(s);
  const CacheKey k = key(s, Form::decoded, 0, 0);
  if (slot == SlotUse::take) note_if_late(k);  // work ahead is no read, late or not
  // Work in a held slot never waits for another caller's decode: that one may be waiting for
  // this very slot (null then, and the caller renders from the JPEG).
  const Admission where = admit(s, Form::decoded);
  ChunkRef c = cache_.get_or_fill(
      k, Form::decoded,
      [&] {
        return staged_or(k, taken_by(slot), [&] {
          return renderer_.decoded(
              s, [&] { return jpeg(s, taken_by(slot)); }, slot);
        });
      },
      where, s.node, slot == SlotUse::held ? Join::never : Join::wait);
  if (c) unstage(k, where, taken_by(slot));
  return c;
}

// A prefetch the SSD is to keep is staged as well (its write may be refused, and reads miss until
// it lands): a read served from the SSD drops the staged copy, counted as the prefetch's hit.
void SampleStore::unstage(const CacheKey& k, const Admission& where, TakenBy by) {
  if (where.ssd && jobs_.staging) jobs_.staging->take(k, by);
}

ChunkRef SampleStore::augmented(const Sample& s, uint32_t variant, bool last_serve) {
  if (!s.dims.known()) throw Error(EIO, "augmented " + s.path + " without its header (see with_header)");
  renderer_.check_renderable(s);
  const Admission admission = last_serve ? Admission::last() : admit(s, Form::augmented);
  const CacheKey k = key(s, Form::augmented, variant, 0);
  note_if_late(k);
  return cache_.get_or_fill(
      k, Form::augmented, [&] { return staged_or(k, TakenBy::read, [&] { return render_augmented(s, variant); }); },
      admission, s.node);
}

ChunkRef SampleStore::rerender(const Sample& s, uint32_t variant) {
  if (!s.dims.known()) throw Error(EIO, "re-render of " + s.path + " without its header");
  const CacheKey k = key(s, Form::augmented, variant, 0);
  if (ChunkRef kept = cache_.lookup(k)) return kept;
  if (jobs_.staging)
    if (ChunkRef staged = jobs_.staging->peek(k)) return staged;
  renderer_.check_renderable(s);
  return render_augmented(s, variant);
}

// Decoded pixels at hand make the render cheapest. A sample the placement keeps decoded, or whose
// decoded form the shared tier keeps, gets its pixels decoded (and admitted, and published)
// first, so an epoch read through augmented/ fills the decoded slots too.
ChunkRef SampleStore::render_augmented(const Sample& s, uint32_t variant, SlotUse slot) {
  const CacheKey dk = key(s, Form::decoded, 0, 0);
  ChunkRef dec = cache_.lookup(dk);
  // Work ahead leaves staged pixels staged: their decoded/ read is still to come, and the render
  // may give way (FillWithdrawn) or decode the JPEG at a DCT scale instead.
  if (!dec && jobs_.staging) dec = slot == SlotUse::held ? jobs_.staging->peek(dk) : jobs_.staging->take(dk);
  // Shared pixels count as at hand too: the cluster then decodes each image once.
  if (!dec && (admit(s, Form::decoded).any() || cache_.shares(Form::decoded))) dec = decoded(s, slot);
  return renderer_.augmented(
      s, variant, dec, [&] { return jpeg(s, taken_by(slot)); }, slot);
}

// In memory already: the decoded pixels, or every raw chunk (a render ahead never holds a cpu slot
// while it waits for the source).
bool SampleStore::inputs_at_hand(const Sample& s, std::optional<uint32_t> variant) {
  auto held = [&](const CacheKey& k) { return cache_.contains(k) || (jobs_.staging && jobs_.staging->contains(k)); };
  // Pixels serve a variant unless it is one the JPEG path decodes at a DCT scale.
  const bool pixels_serve = !variant || renderer_.renders_from_pixels(s, *variant);
  if (pixels_serve && held(key(s, Form::decoded, 0, 0))) return true;
  for (uint64_t i = 0; i < std::max<uint64_t>(1, chunks(s)); i++)
    if (!held(key(s, Form::raw, 0, i))) return false;
  return true;
}

class SampleStore::Prefetching {
 public:
  Prefetching(SampleStore& store, const CacheKey& key) : store_(store), key_(key) {
    std::lock_guard lock(store_.prefetching_mu_);
    store_.prefetching_[key_]++;
    store_.prefetching_count_++;
  }
  ~Prefetching() {
    std::lock_guard lock(store_.prefetching_mu_);
    if (--store_.prefetching_[key_] == 0) store_.prefetching_.erase(key_);
    store_.prefetching_count_--;
  }
  Prefetching(const Prefetching&) = delete;
  Prefetching& operator=(const Prefetching&) = delete;

 private:
  SampleStore& store_;
  const CacheKey& key_;
};

template <class Make>
uint64_t SampleStore::prefetch_entry(const Sample& s, const CacheKey& key, Form form, Make&& make) {
  if (cache_.contains(key) || (jobs_.staging && jobs_.staging->contains(key))) return 0;
  const Admission where = admit(s, form);
  Prefetching marked(*this, key);
  // Kept where the placement keeps it; what RAM does not keep is staged too, not left among the
  // recent fills (the staging is the prefetcher's own, bounded, and the read takes it from there,
  // counted): RAM may refuse it (its form at its quota), and an SSD write is only queued (it may
  // be refused when the writer takes it, and reads miss until it lands). A read the SSD serves
  // drops the staged copy (see unstage).
  Admission a = where.any() ? where : Admission::staged();
  if (jobs_.staging) a.recent = false;
  ChunkRef c = cache_.get_or_fill(key, form, make, a, s.node);
  if (jobs_.staging && !cache_.ram().contains(key)) stage_if_current(s, key, c, false);
  return c->size();
}

SampleStore::Staged SampleStore::stage_if_current(const Sample& s, const CacheKey& key, const ChunkRef& c, bool ahead) {
  if (!(ahead ? jobs_.staging->put_ahead(key, c, s.node) : jobs_.staging->put(key, c, s.node))) return Staged::refused;
  // The file changed since s was resolved: the change dropped what was staged for it before this
  // put (or will drop it after); what this put staged under the old version's key would stay.
  if (tree_.file_state(s.node).version != s.version) {
    jobs_.staging->drop(key);
    return Staged::dropped;
  }
  return Staged::kept;
}

uint64_t SampleStore::prefetch(const Sample& s, Form form, bool may_transform) {
  if (!s.dims.known() && form != Form::raw) {
    probe_head(s);
    const Sample known = resolve(s.node);
    if (!known.dims.known()) return 0;
    return prefetch(known, form, may_transform);
  }
  if (!s.is_sample && form != Form::raw) return 0;
  if (form == Form::decoded && may_transform) {
    const CacheKey k = key(s, Form::decoded, 0, 0);
    // Its raw chunks, staged by an earlier prefetch of this sample, are its inputs.
    return prefetch_entry(s, k, Form::decoded,
                          [&] { return renderer_.decoded(s, [&] { return jpeg(s, TakenBy::work_ahead); }); });
  }
  // Raw (or a decode without a free CPU slot, or the inputs of a variant): the bytes the read will
  // start from.
  uint64_t bytes = 0;
  for (uint64_t i = 0; i < std::max<uint64_t>(1, chunks(s)); i++) {
    const CacheKey k = key(s, Form::raw, 0, i);
    bytes += prefetch_entry(s, k, Form::raw, [&] { return fetch_chunk(s, i); });
  }
  return bytes;
}

// The one way a variant is rendered before its open, for both callers: through the tiers' fill,
// admitted nowhere (usually the variant's last serve is its open, which must not be admitted), so
// an open of this variant meanwhile joins this render instead of making its own, and a render the
// open started first is joined here; then staged while the file's next open still gets it.
SampleStore::Early SampleStore::render_before_open(const Sample& s, uint32_t variant,
                                                   const std::function<bool()>& upcoming, EarlyRoom room) {
  if (!jobs_.staging || !s.is_sample || !s.dims.known()) return {AheadOutcome::skipped};
  renderer_.check_renderable(s);
  const CacheKey k = key(s, Form::augmented, variant, 0);
  if (cache_.contains(k) || jobs_.staging->contains(k)) return {AheadOutcome::ready};
  if (room == EarlyRoom::ahead && !jobs_.staging->has_room_ahead(shapes().augmented_size(s.dims)))
    return {AheadOutcome::skipped};
  if (!inputs_at_hand(s, variant)) return {AheadOutcome::no_inputs};
  std::optional<Prefetching> marked;  // a read of it meanwhile counts as a late prefetch
  if (room == EarlyRoom::prefetch) marked.emplace(*this, k);
  bool made = false;
  // Not joined if an open is rendering it already: that render may be waiting for the CPU slot
  // this caller holds (with cpu=1, or every slot held ahead), and both would wait out fill_wait.
  ChunkRef c;
  try {
    c = cache_.get_or_fill(
        k, Form::augmented,
        [&] {
          made = true;
          return render_augmented(s, variant, SlotUse::held);
        },
        Admission::staged(), s.node, Join::never);
  } catch (const FillWithdrawn&) {
    return {AheadOutcome::skipped};  // gave way to a reader holding transform memory: no error
  }
  if (!c) return {AheadOutcome::ready};  // its open is rendering it: nothing rendered here
  if (!made) return {AheadOutcome::ready};
  if (!upcoming()) return {AheadOutcome::late};  // its open came during the render (and joined it)
  switch (stage_if_current(s, k, c, room == EarlyRoom::ahead)) {
    case Staged::refused: return {AheadOutcome::wasted};
    case Staged::dropped: return {AheadOutcome::rendered, 0};  // the drop counted it wasted, once
    case Staged::kept: break;
  }
  // An open between the check above and the put rendered its own: nobody will take this one.
  if (!upcoming()) {
    jobs_.staging->drop(k);
    return {AheadOutcome::rendered, 0};
  }
  return {AheadOutcome::rendered, c->size()};
}

AheadOutcome SampleStore::render_ahead(const Sample& s, uint32_t variant, const std::function<bool()>& upcoming) {
  return render_before_open(s, variant, upcoming, EarlyRoom::ahead).outcome;
}

SampleStore::Early SampleStore::prefetch_variant(const Sample& s, uint32_t variant,
                                                const std::function<bool()>& upcoming) {
  return render_before_open(s, variant, upcoming, EarlyRoom::prefetch);
}

bool SampleStore::ready(const Sample& s, Form form, uint32_t variant) {
  auto held = [&](const CacheKey& k) { return cache_.contains(k) || (jobs_.staging && jobs_.staging->contains(k)); };
  // A variant is ready only once rendered: pixels or bytes at hand still leave its render to do.
  if (form == Form::augmented) return held(key(s, Form::augmented, variant, 0));
  if (form == Form::decoded && held(key(s, Form::decoded, 0, 0))) return true;
  for (uint64_t i = 0; i < std::max<uint64_t>(1, chunks(s)); i++)
    if (!held(key(s, Form::raw, 0, i))) return false;
  return true;
}

void SampleStore::forget(const Sample& s, Form form, uint32_t variant) {
  switch (form) {
    case Form::raw:
      for (uint64_t i = 0; i < std::max<uint64_t>(1, chunks(s)); i++) cache_.erase(key(s, Form::raw, 0, i));
      break;
    case Form::decoded: cache_.erase(key(s, Form::decoded, 0, 0)); break;
    case Form::augmented:
      cache_.erase(key(s, Form::augmented, variant, 0));
      if (variant > 0) cache_.erase(key(s, Form::augmented, variant - 1, 0));
      break;
  }
}

}  // namespace prepfs
