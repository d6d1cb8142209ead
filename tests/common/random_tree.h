// A random step tree for forward tests (test_cpu_forward.cpp, test_batch.cpp): T tokens, mostly deep (parent = a
// recent node), sometimes wide (parent = any earlier node), each at the position its depth gives after L cache rows.
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>

#include "lookahead/model/step_model.h"

namespace la::test {

inline StepInput random_tree(int T, int L, int V, std::mt19937& rng, int max_fanout_back = 4) {
  StepInput s;
  for (int i = 0; i < T; ++i) {
    const int back = 1 + int(rng() % max_fanout_back);
    s.parents.push_back(i == 0 ? -1 : (rng() % 5 == 0 ? int(rng() % i) : std::max(0, i - back)));
    s.tokens.push_back(int32_t(rng() % V));
    int depth = 0;
    for (int a = s.parents[i]; a >= 0; a = s.parents[a]) ++depth;
    s.positions.push_back(L + depth);
  }
  return s;
}

}  // namespace la::test
