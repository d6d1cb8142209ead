// The batch's draft cap: the largest draft budget any request of a batched step may take, chosen on what steps
// under each cap returned. No libtorch.
//
// Why: each slot's controller (draft_controller.h) chooses its budget as a best reply to the rest of the step, on
// expected yields. Where the cost curve has a knee that goes wrong: SmolLM2 at --batch 4 on a CPU whose GEMM tiles
// hold 8 rows (8 rows 35 ms, 9 rows 41, 16 rows 52), the first slot to choose finds the step below the knee and
// drafts whole, the later ones find it past the knee where any row pays a little, and the step carries 13-17 rows
// where one draft token per request (8 rows) returned more tokens per second (docs/drafting.md, GSM8K x 32: 1.20x
// plain against the default's 1.12x). Two fixes on the controllers' estimates were tried and lost (a cap chosen
// on expected yields, which are flat in the offer's size while returns are not; rows priced symmetrically). This
// one does not trust the estimates: it measures. Steps of D deciding requests (D >= 2) run under a few caps in
// turn (1, 2, 4 draft tokens and no cap), each cap's tokens per second is kept (decayed sums, per D), and the
// best cap runs (a smaller one only when it is `margin` better), with a short window on another cap every
// `explore_every` steps (a cap far below the best less often). Under cap 4 the controllers still choose within the
// cap (a plain step, sleeping), so that cap only removes rows. The caps of 1 and 2 are exact: every deciding
// request drafts min(cap, its draft) where its strategy has one (DraftController::set_cap), while the shared ledger
// can risk it. Under a bound the controllers skipped drafts that fixed drafting took (the first extra row looks dear
// to each slot alone, the rows after it cheap to the step): exact 1 gained 1.04x over the bound 1 on GSM8K x 32
// at --batch 4, exact 2 about 1.05x over the bound 2 on GSM8K x 64 (docs/drafting.md). The cap of 2 is exact only
// while the rows it forces (2 per deciding request) stay within `exact_rows` (8: up to 4 requests): at --batch 8
// its 16 forced rows lost to plain (0.86x in one round; its exploration windows emptied the shared ledger, and
// the batch slept). The cap of 1 is exact at every D, as before.
//
// What it compares (BatchRunner::step): the tokens the step's deciding requests kept, over the step's wall time
// (planning, forward and verification: what the job pays). Steps with prompt chunks are left out (their rows
// are not the cap's doing). The wall clock drifts on a shared machine, but the caps' windows interleave, so the
// drift falls on all of them; the cost model's predicted seconds were tried as the measure and did a little
// worse (docs/drafting.md).
//
// A lone request (D < 2) is never capped: --batch 1 and the end of a job decode as before. Exactness is not
// touched (a cap changes only draft sizes; the verifier keeps what plain decoding gives).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace la {

struct DraftCapOptions {
  int window = 8;             // steps in a row under one cap when it is tried
  int explore_every = 96;     // steps between tries of another cap than the best (per D)
  double decay = 1.0 / 256;   // weight a cap's statistics lose per step run under it
  double margin = 0.03;       // a smaller cap runs only when it beats the larger by this share (noise: rows cost)
  double far = 0.2;           // a cap this share below the best is tried again only every 4 x explore_every steps
  int exact_upto = 2;         // caps up to this budget are exact: every deciding request drafts min(cap, its draft)
  int exact_rows = 8;         // ... a cap above 1 only while cap x deciding requests stays within this
};

class DraftCap {
 public:
  // `ladder`: the strategy's draft ladder (ascending, 0 first; its last entry is "no cap"). `max_deciding`: the
  // batch's slots. Caps tried: the ladder's 1, 2 and 4 when below its top, and the top.
  DraftCap(const std::vector<int>& ladder, int max_deciding, DraftCapOptions opt = {});
  // The cap of the coming step with `deciding` requests whose controllers choose (-1: none).
  int choose(int deciding);
  // The step chosen last ran: its deciding requests kept `tokens` in `seconds`.
  void observe(double tokens, double seconds);
  const std::vector<int>& caps() const { return caps_; }
  // Whether a cap is exact for steps of `deciding` requests (DraftCapOptions::exact_upto and exact_rows, see the
  // header), and its name in reports: "=2" (exact for some D), "4" (at most), "none" (the strategy's largest budget).
  bool exact(int cap, int deciding) const {
    return cap > 0 && cap <= opt_.exact_upto && cap != caps_.back() && (cap == 1 || cap * deciding <= opt_.exact_rows);
  }
  std::string label(size_t arm) const;
  int64_t steps_at(int arm) const { return steps_[arm]; }  // steps run and observed under caps()[arm]
  int last_arm() const { return last_arm_; }                // the index in caps() of the last cap chosen
  double rate(int deciding, int arm) const;                 // its tokens per second (0: never run)

 private:
  struct Arm {
    double tokens = 0, seconds = 0, weight = 0;
    int64_t last = -1;  // the step it last ran
  };
  struct State {
    int arm = -1;        // the cap of the running window
    int left = 0;        // steps left in it
    int64_t since = 0;   // steps since the last try of another cap
  };
  int best(int deciding) const;
  Arm& at(int deciding, int arm) { return arms_[static_cast<size_t>(deciding) * caps_.size() + arm]; }
  const Arm& at(int deciding, int arm) const { return arms_[static_cast<size_t>(deciding) * caps_.size() + arm]; }

  DraftCapOptions opt_;
  std::vector<int> caps_;
  std::vector<Arm> arms_;      // (max_deciding + 1) x caps
  std::vector<State> states_;  // per deciding count
  std::vector<int64_t> steps_;
  int64_t step_ = 0;
  int last_deciding_ = -1, last_arm_ = -1;  // the step observe() books
};

}  // namespace la
