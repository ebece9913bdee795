#include <gtest/gtest.h>

#include <set>

#include "prepfs/cache/policy.h"
#include "prepfs/cache/tier_index.h"

using namespace prepfs;

static CacheKey k(uint64_t n) { return CacheKey{n, n * 7}; }

TEST(Lru, EvictsLeastRecentlyUsed) {
  LruPolicy p;
  for (uint64_t i = 1; i <= 3; i++) p.on_insert(k(i));
  EXPECT_EQ(*p.victim(), k(1));
  p.on_access(k(1));
  EXPECT_EQ(*p.victim(), k(2));
  p.on_erase(k(2));
  EXPECT_EQ(*p.victim(), k(3));
  p.on_erase(k(3));
  p.on_erase(k(1));
  EXPECT_FALSE(p.victim());
}

TEST(Random, VictimsAreMembersAndVary) {
  RandomPolicy p(7);
  for (uint64_t i = 1; i <= 100; i++) p.on_insert(k(i));
  std::set<uint64_t> seen;
  for (int i = 0; i < 200; i++) {
    auto v = p.victim();
    ASSERT_TRUE(v);
    ASSERT_GE(v->hi, 1u);
    ASSERT_LE(v->hi, 100u);
    seen.insert(v->hi);
  }
  EXPECT_GT(seen.size(), 50u);
  for (uint64_t i = 1; i <= 100; i++) p.on_erase(k(i));
  EXPECT_FALSE(p.victim());
}

TEST(NoEviction, NeverNamesAVictim) {
  NoEvictionPolicy p;
  p.on_insert(k(1));
  EXPECT_FALSE(p.victim());
}

TEST(TierIndex, LruEvictsToStayWithinBudget) {
  TierIndex idx(100, make_policy("lru"));
  std::vector<CacheKey> ev;
  EXPECT_TRUE(idx.admit(k(1), 40, Form::raw, &ev));
  EXPECT_TRUE(idx.admit(k(2), 40, Form::decoded, &ev));
  EXPECT_TRUE(idx.touch(k(1)));
  EXPECT_TRUE(idx.admit(k(3), 40, Form::raw, &ev));  // must evict k(2), the least recent
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0], k(2));
  EXPECT_EQ(idx.bytes(), 80u);
  EXPECT_EQ(idx.bytes(Form::raw), 80u);
  EXPECT_EQ(idx.bytes(Form::decoded), 0u);
  EXPECT_LE(idx.bytes(), idx.budget());
  EXPECT_FALSE(idx.admit(k(4), 101, Form::raw, &ev));  // larger than the whole budget
  EXPECT_EQ(idx.entries(), 2u);
}

TEST(TierIndex, NoEvictionRefusesWhenFullAndKeepsEverything) {
  TierIndex idx(100, make_policy("none"));
  std::vector<CacheKey> ev;
  EXPECT_TRUE(idx.admit(k(1), 60, Form::raw, &ev));
  EXPECT_FALSE(idx.admit(k(2), 60, Form::raw, &ev));
  EXPECT_TRUE(ev.empty());
  EXPECT_TRUE(idx.contains(k(1)));
  EXPECT_EQ(idx.bytes(), 60u);
}

TEST(TierIndex, BudgetHoldsUnderRandomChurn) {
  for (const char* policy : {"lru", "random", "none"}) {
    TierIndex idx(10'000, make_policy(policy, 3));
    std::mt19937_64 rng(1);
    std::vector<CacheKey> ev;
    for (int i = 0; i < 5000; i++) {
      uint64_t key = rng() % 500, size = 1 + key * 13 % 900;
      if (rng() % 4 == 0)
        idx.remove(k(key));
      else
        idx.admit(k(key), size, Form::raw, &ev);
      ASSERT_LE(idx.bytes(), idx.budget()) << policy;
    }
  }
}

TEST(TierIndex, ShrinkingTheBudgetEvicts) {
  TierIndex idx(100, make_policy("none"));
  std::vector<CacheKey> ev;
  for (uint64_t i = 0; i < 5; i++) idx.admit(k(i + 1), 20, Form::raw, &ev);
  idx.set_budget(50, &ev);
  EXPECT_LE(idx.bytes(), 50u);
  EXPECT_EQ(ev.size(), 3u);
}

TEST(TierIndex, AFormAtItsQuotaRefusesAndNeverPushesOthersOut) {
  for (const char* policy : {"lru", "random"}) {
    TierIndex idx(100, make_policy(policy, 5));
    std::vector<CacheKey> ev;
    idx.set_form_quotas({20, 80, 0});
    EXPECT_TRUE(idx.admit(k(1), 20, Form::raw, &ev));
    EXPECT_FALSE(idx.admit(k(2), 20, Form::raw, &ev)) << policy;  // raw is at its 20-byte quota
    EXPECT_TRUE(ev.empty()) << policy;                            // and k(1) stays: no churn among kept samples
    EXPECT_TRUE(idx.contains(k(1)));
    EXPECT_FALSE(idx.admit(k(3), 10, Form::augmented, &ev));  // augmented has no share
    for (uint64_t i = 10; i < 14; i++) EXPECT_TRUE(idx.admit(k(i), 20, Form::decoded, &ev));
    EXPECT_EQ(idx.bytes(Form::decoded), 80u);
    EXPECT_TRUE(idx.contains(k(1)));  // decoded filling up never pushed raw out
    EXPECT_FALSE(idx.admit(k(20), 20, Form::decoded, &ev));
    EXPECT_EQ(idx.bytes(Form::decoded), 80u);
    EXPECT_LE(idx.bytes(), idx.budget());
  }
}

TEST(TierIndex, LoweringAQuotaMigratesWithoutFlushing) {
  for (const char* policy : {"lru", "random", "none"}) {
    TierIndex idx(100, make_policy(policy, 3));
    std::vector<CacheKey> ev;
    for (uint64_t i = 1; i <= 5; i++) idx.admit(k(i), 10, Form::raw, &ev);
    for (uint64_t i = 6; i <= 10; i++) idx.admit(k(i), 10, Form::decoded, &ev);
    ev.clear();
    idx.set_form_quotas({30, 70, 0});  // raw 50 -> 30: nothing goes until decoded needs the room
    EXPECT_TRUE(ev.empty()) << policy;
    EXPECT_EQ(idx.bytes(Form::raw), 50u);
    for (uint64_t i = 11; i <= 12; i++) EXPECT_TRUE(idx.admit(k(i), 10, Form::decoded, &ev)) << policy;
    EXPECT_EQ(ev.size(), 2u) << policy;  // each new decoded entry pushed out one raw entry
    EXPECT_EQ(idx.bytes(Form::raw), 30u) << policy;
    EXPECT_EQ(idx.bytes(Form::decoded), 70u) << policy;
    EXPECT_LE(idx.bytes(), idx.budget());
    EXPECT_FALSE(idx.admit(k(13), 10, Form::decoded, &ev));  // decoded at its quota: refused
    EXPECT_EQ(idx.bytes(Form::raw), 30u) << policy;
    EXPECT_EQ(idx.bytes(Form::decoded), 70u) << policy;
  }
}
