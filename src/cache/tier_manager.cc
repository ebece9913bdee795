#include "prepfs/cache/tier_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>

#include "prepfs/common/error.h"
#include "prepfs/common/log_limiter.h"

namespace prepfs {

namespace {
LogLimiter g_join_timeout_log;
}  // namespace

TierManager::TierManager(const CacheConfig& cfg) : cfg_(cfg), residency_(cfg.samples) {
  ram_ =
      std::make_unique<RamTier>(cfg.ram_bytes, make_policy(cfg.eviction, 1, cfg.knowledge), counters_.ram, &residency_);
  if (cfg.ssd_bytes > 0)
    ssd_ = std::make_unique<SsdTier>(cfg.ssd_dir, cfg.ssd_bytes, make_policy(cfg.eviction, 2, cfg.knowledge),
                                     counters_.ssd, cfg.ssd_options, &residency_);
}

bool TierManager::contains(const CacheKey& key) {
  return ram_->contains(key) || ram_->has_recent(key) || (ssd_ && (ssd_->contains(key) || ssd_->contains_spare(key)));
}

bool TierManager::in_tier(const CacheKey& key) const {
  return ram_->contains(key) || (ssd_ && (ssd_->contains(key) || ssd_->contains_spare(key)));
}

void TierManager::sample_changed(uint32_t sample) {
  ram_->sample_changed(sample);
  if (ssd_) ssd_->sample_changed(sample);
}

TierManager::~TierManager() = default;

void TierManager::FlightEnd::end() {
  // A flight that landed removed its entry already: by now the key may be a new fill's.
  if (ended) return;
  std::lock_guard lock(self->inflight_mu_);
  self->inflight_.erase(key);
  self->erased_while_filling_.erase(key);
  ended = true;
}

void TierManager::land(const CacheKey& key, const ChunkRef& chunk, Form form, Admission admit, uint32_t sample,
                       bool from_fill, FlightEnd* flight) {
  // Not kept in RAM (not admitted there, or refused): at hand for the file's next read requests
  // all the same (an SSD admission is queued, and may not be readable back for a while).
  const bool in_ram = admit.ram && ram_->put(key, chunk, form, sample);
  if (!in_ram && !admit.last_use && admit.recent) ram_->put_recent(key, chunk);
  // A spare copy may follow, refused while a full disk keeps the SSD's budget low: its probe for
  // room is a statvfs, made here before the flight lock, which every miss takes.
  if (ssd_ && from_fill && in_ram) ssd_->probe_room_if_due();
  // The end of the flight, under its lock. An erase that came while this fill ran wins: the
  // chunk is served, not kept (else a re-plan's move could leave the entry it dropped behind,
  // in RAM or on the SSD); the SSD writes are queued only here, so none needs undoing. An
  // erase after this finds every admission in place. (No fill of the key starts meanwhile.)
  std::lock_guard lock(inflight_mu_);
  flight->ended = true;
  inflight_.erase(key);
  if (erased_while_filling_.erase(key) > 0) {
    ram_->erase(key);
  } else if (ssd_ && from_fill && admit.ssd) {
    ssd_->put_async(key, chunk, form, sample);
  } else if (ssd_ && from_fill && in_ram && form != Form::augmented) {
    // What RAM keeps is on the SSD too while it has room (a spare copy: warm restarts). Not
    // an augmented variant: it lives for aug_reuse opens, its last serve drops it, and the
    // open counts start again at a restart, so its spare would be written and never read.
    ssd_->put_spare_async(key, chunk, form, sample);
  }
}

void TierManager::keep(const CacheKey& key, ChunkRef chunk, Form form, Admission admit, uint32_t sample) {
  if (!admit.any() || admit.last_use || !chunk) return;
  std::promise<ChunkRef> promise;
  {
    std::lock_guard lock(inflight_mu_);
    if (inflight_.count(key)) return;  // that fill admits the key as its caller says
    inflight_.emplace(key, promise.get_future().share());
  }
  FlightEnd done{this, key};
  try {
    // A flight of its own, so an erase meanwhile wins as it does over a fill. Not counted as a
    // fill: the bytes were fetched (and counted) by the call that put them among the recent fills.
    if (admit.ram && ram_->contains(key)) admit.ram = false;
    // A RAM put takes the key's recent copy before it decides; a refused one must get it back.
    admit.recent = ram_->has_recent(key);
    const bool on_ssd = ssd_ && ssd_->contains(key);
    land(key, chunk, form, admit, sample, !on_ssd, &done);
    promise.set_value(std::move(chunk));
  } catch (...) {
    done.end();  // before the error is given (see get_or_fill)
    promise.set_exception(std::current_exception());
    throw;
  }
}

void TierManager::note_spent(const CacheKey& key) {
  std::lock_guard lock(inflight_mu_);
  if (!spent_.insert(key).second) return;
  spent_order_.push_back(key);
  if (spent_order_.size() > kSpentKeys) {
    spent_.erase(spent_order_.front());
    spent_order_.pop_front();
  }
}

ChunkRef TierManager::get_or_fill(const CacheKey& key, Form form, Fill fill, Admission admit, uint32_t sample,
                                  Join join) {
  auto& pf = counters_.by_form[index_of(form)];
  // Before the lookups: an earlier use whose flight starts after this one keeps nothing.
  if (admit.last_use) note_spent(key);
  // A last use takes a cached copy with it: nobody will ask for this entry again.
  auto served = [&](ChunkRef c) {
    if (admit.last_use) erase(key);
    return c;
  };
  if (ChunkRef hit = ram_->get(key)) {
    bump(pf.ram_hits);
    bump(pf.ram_hit_bytes, hit->size());
    return served(std::move(hit));
  }
  if (ChunkRef recent = ram_->get_recent(key)) return served(std::move(recent));

  std::promise<ChunkRef> promise;
  {
    std::unique_lock lock(inflight_mu_);
    auto it = inflight_.find(key);
    if (it != inflight_.end()) {
      if (join == Join::never) return nullptr;
      std::shared_future<ChunkRef> pending = it->second;
      lock.unlock();
      bump(counters_.joined);
      if (pending.wait_for(cfg_.fill_wait) != std::future_status::ready) {
        bump(counters_.join_timeouts);
        // A last use that gives up is a last use all the same: nobody asks for the entry again, so
        // the fill it waited for keeps nothing (the erase marks the flight).
        if (admit.last_use) erase(key);
        const auto secs = std::chrono::duration<double>(cfg_.fill_wait).count();
        if (g_join_timeout_log.allow())
          spdlog::warn(
              "cache: a read waited {:.3g} s for another reader's fetch of the same data; giving up (ETIMEDOUT)", secs);
        throw Error(ETIMEDOUT, "waited " + fmt::format("{:.3g}", secs) + " s for another reader's fill");
      }
      try {
        return served(pending.get());  // rethrows the filler's error
      } catch (const FillWithdrawn&) {
        // Not an answer for this reader, whose own fill waits for what it needs.
      }
      return get_or_fill(key, form, std::move(fill), admit, sample, join);
    }
    inflight_.emplace(key, promise.get_future().share());
    if (spent_.count(key)) admit = Admission::last();  // its last use came first
  }
  // Whatever happens below, the in-flight entry goes and the waiters are answered.
  FlightEnd done{this, key};

  try {
    ChunkRef chunk = ssd_ ? ssd_->get(key, sample) : nullptr;
    // A hit on a planned SSD entry is kept there already; one on a spare copy (a warm restart's)
    // is written again as a planned entry when the SSD is admitted, as keep() does: spares sit
    // outside the quotas and are the first to go.
    const bool from_fill = !chunk || !ssd_->contains(key);
    if (!chunk) {
      // The shared tier between the SSD and the fill: another node's fill is as good as ours.
      // A fill is counted when it starts (joiners and tests watch it while it runs); a shared
      // hit is not one.
      auto counted_fill = [&] {
        bump(counters_.fills);
        return fill();
      };
      SharedTier::Result got{nullptr, false};
      if (shares(form) && !admit.last_use)
        got = cfg_.shared->get_or_fill(key, form, counted_fill);
      else
        got.chunk = counted_fill();
      chunk = std::move(got.chunk);
      if (got.hit) {
        bump(pf.shared_hits);
        bump(pf.shared_hit_bytes, chunk->size());
      } else {
        bump(pf.misses);
        bump(pf.miss_bytes, chunk->size());
      }
    } else {
      bump(pf.ssd_hits);
      bump(pf.ssd_hit_bytes, chunk->size());
      if (admit.last_use) ssd_->erase(key);
    }
    land(key, chunk, form, admit, sample, from_fill, &done);
    promise.set_value(chunk);
    return chunk;
  } catch (...) {
    // Work ahead giving way is no error of the fill.
    try {
      throw;
    } catch (const FillWithdrawn&) {
    } catch (...) {
      bump(counters_.fill_errors);
    }
    // The flight ends before its readers get the error: a request that comes after the failure
    // starts a fill of its own (the source may be back) instead of joining and getting an error
    // from a fill it never shared.
    done.end();
    if (cfg_.after_failed_fill) cfg_.after_failed_fill(key);
    promise.set_exception(std::current_exception());
    throw;
  }
}

ChunkRef TierManager::lookup(const CacheKey& key) {
  if (ChunkRef hit = ram_->get(key)) return hit;
  if (ChunkRef recent = ram_->get_recent(key)) return recent;
  return ssd_ ? ssd_->get(key) : nullptr;
}

void TierManager::erase(const CacheKey& key) {
  {
    std::lock_guard lock(inflight_mu_);
    if (inflight_.count(key)) erased_while_filling_.insert(key);
  }
  ram_->erase(key);
  if (ssd_) ssd_->erase(key);
}

void TierManager::set_partition(const std::array<double, kForms>& ram_shares,
                                const std::array<double, kForms>& ssd_shares) {
  ram_->set_form_quotas(TierIndex::quotas_of(ram_->stats().budget, ram_shares));
  if (ssd_) ssd_->set_form_shares(ssd_shares);  // the SSD's budget moves (a full disk): its quotas follow
}

TierStats TierManager::stats(Tier t) const {
  if (t == Tier::ram) return ram_->stats();
  return ssd_ ? ssd_->stats() : TierStats{};
}

void TierManager::evict_all() {
  ram_->clear();
  if (ssd_) ssd_->clear();
}

bool TierManager::flush(std::chrono::milliseconds timeout) { return !ssd_ || ssd_->flush(timeout); }

}  // namespace prepfs
