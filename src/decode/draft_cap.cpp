// The batch's draft cap (see draft_cap.h for the rule and why).
#include "lookahead/decode/draft_cap.h"

#include <algorithm>

#include "lookahead/util/error.h"

namespace la {

DraftCap::DraftCap(const std::vector<int>& ladder, int max_deciding, DraftCapOptions opt) : opt_(opt) {
  LA_CHECK(opt_.window >= 1 && opt_.explore_every >= 1 && opt_.decay >= 0 && opt_.decay < 1 && opt_.exact_rows >= 0,
           "draft cap: bad options");
  const int top = ladder.empty() ? 0 : ladder.back();
  if (top > 0) {
    for (int c : {1, 2, 4})
      if (c < top && std::find(ladder.begin(), ladder.end(), c) != ladder.end()) caps_.push_back(c);
    caps_.push_back(top);
  }
  const int n = std::max(0, max_deciding) + 1;
  arms_.assign(static_cast<size_t>(n) * caps_.size(), Arm{});
  states_.assign(static_cast<size_t>(n), State{});
  steps_.assign(caps_.size(), 0);
}

std::string DraftCap::label(size_t arm) const {
  if (arm + 1 == caps_.size()) return "none";
  std::string s = std::to_string(caps_[arm]);
  if (exact(caps_[arm], 2)) s.insert(s.begin(), '=');  // exact at the smallest batch it caps (D >= 2)
  return s;
}

double DraftCap::rate(int deciding, int arm) const {
  const Arm& a = at(deciding, arm);
  return a.seconds > 0 ? a.tokens / a.seconds : 0.0;
}

int DraftCap::best(int deciding) const {
  int b = static_cast<int>(caps_.size()) - 1;
  for (int a = b - 1; a >= 0; --a)
    if (rate(deciding, a) > rate(deciding, b) * (1 + opt_.margin)) b = a;
  return b;
}

int DraftCap::choose(int deciding) {
  last_deciding_ = -1;
  if (deciding < 2 || caps_.size() < 2 || deciding >= static_cast<int>(states_.size())) return -1;
  State& st = states_[deciding];
  ++st.since;
  if (st.left <= 0) {
    // Caps never run here first (the largest first: the first steps of a job draft as without a cap), then the
    // best, and every explore_every steps a window on the cap run longest ago.
    int pick = -1;
    for (int a = static_cast<int>(caps_.size()) - 1; a >= 0 && pick < 0; --a)
      if (at(deciding, a).weight <= 0) pick = a;
    if (pick >= 0) {
      st.left = opt_.window;
    } else if (st.since >= opt_.explore_every) {
      // The cap run longest ago; one far below the best only when it last ran 4 x explore_every steps ago.
      const int b = best(deciding);
      const double floor = (1 - opt_.far) * rate(deciding, b);
      for (int a = 0; a < static_cast<int>(caps_.size()); ++a) {
        const bool near = rate(deciding, a) >= floor || step_ - at(deciding, a).last >= 4 * opt_.explore_every;
        if (a != b && near && (pick < 0 || at(deciding, a).last < at(deciding, pick).last)) pick = a;
      }
      if (pick < 0) pick = b;
      st.left = pick == b ? 1 : opt_.window;
      st.since = 0;
    } else {
      pick = best(deciding);
      st.left = 1;
    }
    st.arm = pick;
  }
  --st.left;
  last_deciding_ = deciding;
  last_arm_ = st.arm;
  return caps_[st.arm];
}

void DraftCap::observe(double tokens, double seconds) {
  if (last_deciding_ < 0 || !(seconds > 0)) return;
  Arm& a = at(last_deciding_, last_arm_);
  const double keep = 1 - opt_.decay;
  a.tokens = a.tokens * keep + tokens;
  a.seconds = a.seconds * keep + seconds;
  a.weight = a.weight * keep + 1;
  a.last = step_++;
  ++steps_[last_arm_];
  last_deciding_ = -1;
}

}  // namespace la
