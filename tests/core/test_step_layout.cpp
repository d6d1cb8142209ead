// Host-side step layout of the CUDA forward: packed ancestor bits against a brute-force ancestor walk on random
// trees, bucket selection, padding.
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "lookahead/backend/cuda/step_layout.h"

namespace {

// Brute force: is j an ancestor-or-self of i (the walk stops at a parent outside [-1, current)).
bool is_ancestor(const std::vector<int32_t>& parents, int i, int j) {
  for (int a = i; a >= 0;) {
    if (a == j) return true;
    const int p = parents[a];
    if (p < -1 || p >= a) return false;
    a = p;
  }
  return false;
}

std::vector<int32_t> random_tree(int T, int shape, std::mt19937& rng) {
  std::vector<int32_t> p(T);
  for (int i = 0; i < T; ++i) {
    if (i == 0) p[i] = -1;
    else if (shape == 0) p[i] = i - 1;                                                    // chain
    else if (shape == 1) p[i] = std::uniform_int_distribution<int>(-1, i - 1)(rng);       // any tree / forest
    else p[i] = std::uniform_int_distribution<int>(std::max(-1, i - 3), i - 1)(rng);      // deep, narrow
  }
  return p;
}

bool bit(const std::vector<uint32_t>& bits, int words, int i, int j) {
  return (bits[size_t(i) * words + (j >> 5)] >> (j & 31)) & 1u;
}

// A batched step's upload: the slots' tokens one after another (parents shifted to step indices, so the ancestor
// bits never cross slots), per slot {first row, tokens, cache length, cache rows}, the cache pointer table per
// layer (K bases, then V bases), unused slots empty.
TEST(StepLayout, BatchStep) {
  auto l = la::batch_step_layout(8, 2);
  EXPECT_EQ(l.slots, 8);
  EXPECT_EQ(la::batch_step_layout(256, 2).slots, la::kMaxBatchSlots);
  EXPECT_EQ(l.seg, l.step.words);
  EXPECT_EQ(l.ptrs % 2, 0);
  EXPECT_EQ(l.words, l.ptrs + 2 * 2 * 2 * l.slots);
  int kv[8];
  void* k0[2] = {&kv[0], &kv[1]};
  void* v0[2] = {&kv[2], &kv[3]};
  void* k1[2] = {&kv[4], &kv[5]};
  void* v1[2] = {&kv[6], &kv[7]};
  const std::vector<int32_t> t0{7, 8, 9}, p0{10, 11, 11}, a0{-1, 0, 0}, t1{4, 5}, p1{3, 4}, a1{-1, 0};
  la::BatchSlotStep s[2];
  s[0] = {t0.data(), p0.data(), a0.data(), 3, 10, 64, k0, v0};
  s[1] = {t1.data(), p1.data(), a1.data(), 2, 3, 32, k1, v1};
  std::vector<int32_t> buf(l.words, 12345);
  la::fill_batch_step(s, 2, 2, l, buf.data());
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.step.ids, buf.begin() + l.step.ids + 8),
            (std::vector<int32_t>{7, 8, 9, 4, 5, 0, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.step.positions, buf.begin() + l.step.positions + 8),
            (std::vector<int32_t>{10, 11, 11, 3, 4, 4, 4, 4}));
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.step.parents, buf.begin() + l.step.parents + 8),
            (std::vector<int32_t>{-1, 0, 0, -1, 3, -1, -1, -1}));
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(buf.data() + l.step.bits);
  EXPECT_EQ(bits[2], 0b101u);
  EXPECT_EQ(bits[3], 0b1000u) << "slot 1's root sees no row of slot 0";
  EXPECT_EQ(bits[4], 0b11000u);
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.seg, buf.begin() + l.seg + 12),
            (std::vector<int32_t>{0, 3, 10, 64, 3, 2, 3, 32, 5, 0, 0, 0}));
  const void* const* ptr = reinterpret_cast<const void* const*>(buf.data() + l.ptrs);
  EXPECT_EQ(ptr[0], k0[0]);              // layer 0 K: slot 0, slot 1
  EXPECT_EQ(ptr[1], k1[0]);
  EXPECT_EQ(ptr[l.slots], v0[0]);        // layer 0 V
  EXPECT_EQ(ptr[2 * l.slots + 1], k1[1]);  // layer 1 K, slot 1
  EXPECT_EQ(ptr[3 * l.slots + 1], v1[1]);  // layer 1 V, slot 1
  EXPECT_EQ(ptr[2], nullptr);            // unused slot
  EXPECT_EQ(l.step.lm_rows, 8);          // every row an output: the LM head on the first 8 rows, not gathered
  EXPECT_FALSE(l.step.gather);
  EXPECT_THROW(la::fill_batch_step(s, 9, 2, l, buf.data()), std::exception);
  // Output rows {first outputs of the two slots -> LM head rows, gathered, the output list}: slot 0 a prompt chunk's
  // last row and slot 1 none (a chunk before its last): step row 2 alone, in a bucket of 1; rows 1, 2 and 3, 4:
  // four outputs of five rows, a bucket of 8; none at all: no LM head.
  const std::vector<std::tuple<int, int, int, bool, std::vector<int32_t>>> cases{
      {2, 2, 1, true, {2, 0, 0, 0, 0, 0, 0, 0}}, {1, 0, 8, true, {1, 2, 3, 4, 0, 0, 0, 0}}, {3, 2, 0, true, {}}};
  for (const auto& [f0, f1, lm_rows, gather, list] : cases) {
    s[0].first_output = f0;
    s[1].first_output = f1;
    la::fill_batch_step(s, 2, 2, l, buf.data());
    EXPECT_EQ(l.step.lm_rows, lm_rows) << f0 << ", " << f1;
    EXPECT_EQ(l.step.gather, gather) << f0 << ", " << f1;
    if (!list.empty()) {
      EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.step.outputs, buf.begin() + l.step.outputs + 8), list);
    }
  }
  s[1].first_output = 3;
  EXPECT_THROW(la::fill_batch_step(s, 2, 2, l, buf.data()), std::exception) << "first output past the slot's rows";
}

}  // namespace

TEST(StepLayout, AncestorBitsMatchBruteForceOnRandomTrees) {
  std::mt19937 rng(5);
  for (int T : {1, 2, 7, 31, 32, 33, 64, 65, 100, 200, 256}) {
    for (int shape = 0; shape < 3; ++shape) {
      for (int rep = 0; rep < 3; ++rep) {
        const auto p = random_tree(T, shape, rng);
        for (int rows : {T, la::step_bucket(T) > 0 ? la::step_bucket(T) : T, T + 40}) {
          const auto bits = la::pack_ancestor_bits(p, rows);
          const int w = la::ancestor_words(rows);
          ASSERT_EQ(bits.size(), size_t(rows) * w);
          for (int i = 0; i < rows; ++i)
            for (int j = 0; j < w * 32; ++j) {
              const bool want = i < T ? (j < T && is_ancestor(p, i, j)) : j == i;  // padding: itself only
              ASSERT_EQ(bit(bits, w, i, j), want) << "T=" << T << " rows=" << rows << " i=" << i << " j=" << j;
            }
        }
      }
    }
  }
}

TEST(StepLayout, InvalidParentEndsTheWalk) {
  // Token 2's parent 5 is not before it; token 3's parent -7 is below -1: both see themselves only, and token 4
  // (child of 3) sees 3 and itself.
  const std::vector<int32_t> p{-1, 0, 5, -7, 3};
  const auto bits = la::pack_ancestor_bits(p, 5);
  EXPECT_EQ(bits[0], 0b1u);
  EXPECT_EQ(bits[1], 0b11u);
  EXPECT_EQ(bits[2], 0b100u);
  EXPECT_EQ(bits[3], 0b1000u);
  EXPECT_EQ(bits[4], 0b11000u);
}

TEST(StepLayout, Buckets) {
  EXPECT_EQ(la::step_buckets(), (std::vector<int>{1, 8, 16, 32, 64, 128, 256}));
  const std::vector<std::pair<int, int>> cases{{1, 1},   {2, 8},     {8, 8},     {9, 16},  {16, 16}, {17, 32},
                                               {33, 64}, {64, 64},   {65, 128},  {129, 256}, {256, 256}, {257, -1}};
  for (auto [T, b] : cases) EXPECT_EQ(la::step_bucket(T), b) << "T=" << T;
  EXPECT_EQ(la::step_bucket(3, {4, 2}), 4);  // first fitting bucket of the list given
}

TEST(StepLayout, PaddedStep) {
  for (int rows : la::step_buckets()) {
    const auto l = la::padded_step_layout(rows);
    EXPECT_EQ(l.rows, rows);
    EXPECT_EQ(l.bits % 4, 0) << "bits must start 16-byte aligned";
    EXPECT_GE(l.bits, l.cache_len + 1);
    EXPECT_EQ(l.outputs, l.bits + rows * la::ancestor_words(rows));
    EXPECT_EQ(l.words, l.outputs + rows);
  }
  auto l = la::padded_step_layout(8);
  std::vector<int32_t> buf(l.words, 12345);
  la::fill_padded_step({7, 8, 9}, {10, 11, 11}, {-1, 0, 0}, 10, 0, l, buf.data());
  EXPECT_EQ(l.lm_rows, 8);
  EXPECT_FALSE(l.gather);
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.ids, buf.begin() + l.ids + 8),
            (std::vector<int32_t>{7, 8, 9, 0, 0, 0, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.positions, buf.begin() + l.positions + 8),
            (std::vector<int32_t>{10, 11, 11, 11, 11, 11, 11, 11}));
  EXPECT_EQ(std::vector<int32_t>(buf.begin() + l.parents, buf.begin() + l.parents + 8),
            (std::vector<int32_t>{-1, 0, 0, -1, -1, -1, -1, -1}));
  EXPECT_EQ(buf[l.cache_len], 10);
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(buf.data() + l.bits);
  EXPECT_EQ(bits[0], 0b1u);
  EXPECT_EQ(bits[1], 0b11u);
  EXPECT_EQ(bits[2], 0b101u);
  for (int i = 3; i < 8; ++i) EXPECT_EQ(bits[i], 1u << i) << "padding row " << i;
  EXPECT_THROW(la::fill_padded_step(std::vector<int32_t>(9, 1), std::vector<int32_t>(9, 1),
                                    std::vector<int32_t>(9, -1), 0, 0, l, buf.data()),
               std::exception);
  // A prompt chunk: only its last row is an output.
  la::fill_padded_step({7, 8, 9}, {10, 11, 12}, {-1, 0, 1}, 10, 2, l, buf.data());
  EXPECT_EQ(l.lm_rows, 1);
  EXPECT_TRUE(l.gather);
  EXPECT_EQ(buf[l.outputs], 2);
  la::fill_padded_step({7, 8, 9}, {10, 11, 12}, {-1, 0, 1}, 10, 3, l, buf.data());
  EXPECT_EQ(l.lm_rows, 0);
  EXPECT_THROW(la::fill_padded_step({7}, {10}, {-1}, 10, 2, l, buf.data()), std::exception);
}

TEST(StepLayout, LmHeadRows) {
  EXPECT_EQ(la::lm_head_rows(0, 64), 0);
  EXPECT_EQ(la::lm_head_rows(1, 64), 1);
  EXPECT_EQ(la::lm_head_rows(2, 64), 8);
  EXPECT_EQ(la::lm_head_rows(17, 64), 32);
  EXPECT_EQ(la::lm_head_rows(40, 64), 64);
  EXPECT_EQ(la::lm_head_rows(5, 1), 1);  // never more than the step's rows
}
