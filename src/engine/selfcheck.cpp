// The start-up self-check: see include/lookahead/engine/selfcheck.h.
#include "lookahead/engine/selfcheck.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <iomanip>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "lookahead/util/clock.h"
#include "lookahead/util/error.h"

namespace la {

// parse_selfcheck_mode: load_options.cpp (libtorch-free, linked by the --config fuzz target).

const char* selfcheck_mode_name(SelfCheckMode m) {
  switch (m) {
    case SelfCheckMode::On: return "on";
    case SelfCheckMode::Strict: return "strict";
    case SelfCheckMode::Off: break;
  }
  return "off";
}

std::string ServingPath::name() const {
  if (!kernels) return "ATen forward";
  return graphs ? "kernels, graphs" : "kernels";
}

SelfCheckTolerance selfcheck_tolerance(const std::string& dtype) {
  if (dtype == "fp32" || dtype == "float32") return {1e-3, true};
  if (dtype == "fp16" || dtype == "float16") return {2e-2, false};
  if (dtype == "bf16" || dtype == "bfloat16") return {6e-2, false};
  fail("selfcheck: unknown dtype '", dtype, "'");
}

std::vector<SelfCheckStep> selfcheck_script(const ModelConfig& cfg, const std::vector<int>& buckets, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };  // [lo, hi]
  std::vector<SelfCheckStep> out;
  int L = 0, prev = 0;
  for (int B : buckets) {
    LA_CHECK(B >= 1, "selfcheck: bucket ", B);
    for (int r = 0; r < 3; ++r) {  // warm-up, capture, replay on a CUDA-graph path
      const int T = r == 0 || B < 3 ? B : uniform(std::max(prev + 1, 3), B);  // >= 3: a non-prefix path
      SelfCheckStep s;
      s.step.tokens.resize(T);
      s.step.parents.resize(T);
      s.step.positions.resize(T);
      std::vector<int> depth(T);
      for (int i = 0; i < T; ++i) {
        int p = -1;
        if (i == 1 || i == 2) p = 0;  // two siblings under token 0: node 2's path {0, 2} is not a prefix
        else if (i > 2) p = uniform(0, 1) ? i - 1 : uniform(-1, i - 2);
        s.step.parents[i] = p;
        depth[i] = p < 0 ? 0 : depth[p] + 1;
        s.step.tokens[i] = uniform(0, cfg.vocab - 1);
      }
      const int max_depth = *std::max_element(depth.begin(), depth.end());
      if (L + max_depth + 1 > cfg.max_positions) return out;  // a short-context model gets a shorter script
      for (int i = 0; i < T; ++i) s.step.positions[i] = L + depth[i];
      // Commit a root-to-node path; in multi-token steps one whose indices are not 0, 1, ..., k-1.
      std::vector<int> cand;
      for (int i = 0; i < T; ++i) {
        bool prefix = true;
        for (int a = i, k = depth[i]; a >= 0; a = s.step.parents[a], --k) prefix = prefix && a == k;
        if (!prefix || T == 1) cand.push_back(i);
      }
      const int node = cand.empty() ? T - 1 : cand[uniform(0, static_cast<int>(cand.size()) - 1)];
      for (int a = node; a >= 0; a = s.step.parents[a]) s.commit.push_back(a);
      std::reverse(s.commit.begin(), s.commit.end());
      L += static_cast<int>(s.commit.size());
      out.push_back(std::move(s));
    }
    prev = B;
  }
  return out;
}

namespace {

std::string fmt(double v) {
  std::ostringstream os;
  os << std::setprecision(4) << v;
  return os.str();
}

// "" when candidate agrees with reference on this step; else the first disagreement.
std::string compare_step(const std::vector<int32_t>& ref_ids, const std::vector<float>& ref_logits,
                         const std::vector<int32_t>& ids, const std::vector<float>* logits, int V,
                         const SelfCheckTolerance& tol) {
  const size_t T = ref_ids.size();
  if (ids.size() != T) return detail::cat(ids.size(), " ids for ", T, " tokens");
  if (logits && logits->size() != ref_logits.size())
    return detail::cat(logits->size(), " logits for ", T, " tokens of ", V);
  for (size_t t = 0; t < T; ++t) {
    const float* r = ref_logits.data() + t * V;
    double scale = 1, top1 = -INFINITY, top2 = -INFINITY;
    for (int j = 0; j < V; ++j) {
      scale = std::max(scale, std::fabs(double(r[j])));
      if (r[j] > top1) top2 = top1, top1 = r[j];
      else if (r[j] > top2) top2 = r[j];
    }
    const double bound = tol.rel * scale;
    if (logits) {
      const float* c = logits->data() + t * V;
      for (int j = 0; j < V; ++j) {
        const double d = std::fabs(double(c[j]) - double(r[j]));
        if (!(d <= bound))  // NaN fails too
          return detail::cat("token ", t, ": logit of id ", j, " is ", fmt(c[j]), ", reference ", fmt(r[j]),
                             " (difference ", fmt(d), ", tolerance ", fmt(bound), ")");
      }
    }
    if (ids[t] < 0 || ids[t] >= V) return detail::cat("token ", t, ": next id ", ids[t], " outside the vocabulary");
    if (tol.compare_argmax && ids[t] != ref_ids[t] && !(top1 - top2 <= bound))
      return detail::cat("token ", t, ": next id ", ids[t], ", reference ", ref_ids[t], " (not a near tie: margin ",
                         fmt(top1 - top2), ")");
  }
  return "";
}

// Runs the script on both models; "" when they agree, else which step disagrees and how.
std::string check_path(StepModel& ref, StepModel& cand, const std::vector<SelfCheckStep>& script,
                       const SelfCheckTolerance& tol, int V) {
  SampleParams greedy;
  std::vector<float> rl, cl;
  for (size_t k = 0; k < script.size(); ++k) {
    const SelfCheckStep& s = script[k];
    const std::string where = detail::cat("step ", k + 1, " of ", script.size(), " (", s.step.tokens.size(),
                                          " tokens at cache length ", ref.cache_len(), "), ");
    const std::vector<int32_t> rid = ref.forward(s.step, greedy, &rl);
    // Every third step takes the serving hot path (ids only, no logits download).
    const bool ids_only = k % 3 == 2;
    std::vector<int32_t> cid;
    try {
      cid = cand.forward(s.step, greedy, ids_only ? nullptr : &cl);
    } catch (const std::exception& e) {
      return where + "forward failed: " + e.what();
    }
    const std::string d = compare_step(rid, rl, cid, ids_only ? nullptr : &cl, V, tol);
    if (!d.empty()) return where + d;
    ref.commit(s.commit);
    try {
      cand.commit(s.commit);
    } catch (const std::exception& e) {
      return where + "commit failed: " + e.what();
    }
    if (cand.cache_len() != ref.cache_len())
      return where + detail::cat("cache length ", cand.cache_len(), " after commit, reference ", ref.cache_len());
  }
  return "";
}

std::mutex& reports_mutex() {
  static std::mutex m;
  return m;
}
std::vector<SelfCheckReport>& reports() {
  static std::vector<SelfCheckReport> r;
  return r;
}

// A model whose forward goes wrong from its n-th call on (fault injection for the tests of the fallback chain).
class FaultyModel final : public StepModel {
 public:
  FaultyModel(std::unique_ptr<StepModel> m, SelfCheckFault f, int at) : m_(std::move(m)), f_(f), at_(at) {}
  const ModelConfig& config() const override { return m_->config(); }
  int cache_len() const override { return m_->cache_len(); }
  std::vector<int32_t> forward(const StepInput& step, const SampleParams& sp, std::vector<float>* logits) override {
    if (++calls_ < at_) return m_->forward(step, sp, logits);
    if (f_ == SelfCheckFault::Throw) fail("injected fault: forward ", calls_, " throws");
    std::vector<int32_t> ids = m_->forward(step, sp, logits);
    const int V = config().vocab, t = static_cast<int>(ids.size()) - 1;
    if (logits) {  // the last token's logit of id 3 moves by a quarter of the row's largest magnitude
      float* row = logits->data() + static_cast<size_t>(t) * V;
      float scale = 1;
      for (int j = 0; j < V; ++j) scale = std::max(scale, std::fabs(row[j]));
      row[3 % V] += 0.25f * scale;
    } else {
      ids[t] = (ids[t] + 1) % V;
    }
    return ids;
  }
  void commit(const std::vector<int32_t>& idx) override { m_->commit(idx); }
  void truncate(int len) override { m_->truncate(len); }
  uint64_t checksum() const override { return m_->checksum(); }
  std::string describe() const override { return m_->describe() + " (fault injected)"; }

 private:
  std::unique_ptr<StepModel> m_;
  SelfCheckFault f_;
  int at_, calls_ = 0;
};

}  // namespace

std::unique_ptr<StepModel> inject_fault(std::unique_ptr<StepModel> m, SelfCheckFault f, int at_forward) {
  if (f == SelfCheckFault::None) return m;
  return std::make_unique<FaultyModel>(std::move(m), f, at_forward);
}

std::unique_ptr<StepModel> selfcheck_fault_for_testing(std::unique_ptr<StepModel> m, const ServingPath& p) {
  const char* e = std::getenv("LOOKAHEAD_SELFCHECK_FAULT");
  if (!e || !*e || !p.kernels) return m;
  const std::string key = p.graphs ? "graphs=" : "kernels=";
  std::string spec = std::string(",") + e + ",";
  const auto at = spec.find("," + key);
  if (at == std::string::npos) return m;
  const std::string kind = spec.substr(at + 1 + key.size(), spec.find(',', at + 1) - at - 1 - key.size());
  LA_CHECK(kind == "corrupt" || kind == "throw", "LOOKAHEAD_SELFCHECK_FAULT: unknown fault '", kind,
           "' (expected corrupt or throw)");
  return inject_fault(std::move(m), kind == "corrupt" ? SelfCheckFault::Corrupt : SelfCheckFault::Throw);
}

std::string SelfCheckReport::summary() const {
  if (mode == SelfCheckMode::Off) return "selfcheck off";
  std::string failed;
  for (const auto& a : attempts)
    if (!a.ok) failed += (failed.empty() ? "" : "; ") + a.path.name() + " failed (" + a.detail + ")";
  if (failed.empty()) return "selfcheck passed (" + std::to_string(steps) + " steps)";
  return "selfcheck: " + failed + "; serving " + serving.name();
}

std::string SelfCheckReport::json() const {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& x : attempts) a.push_back({{"path", x.path.name()}, {"ok", x.ok}, {"detail", x.detail}});
  return nlohmann::json{{"mode", selfcheck_mode_name(mode)}, {"model", model},       {"serving", serving.name()},
                        {"steps", steps},                    {"seconds", seconds},   {"attempts", a}}
      .dump();
}

SelfCheckReport run_selfcheck(const ServingPathFactory& make, const std::vector<ServingPath>& candidates,
                              const SelfCheckOptions& opt) {
  LA_CHECK(!candidates.empty(), "selfcheck: no candidate path");
  SelfCheckReport rep;
  rep.mode = opt.mode;
  rep.serving = candidates.front();
  if (opt.mode == SelfCheckMode::Off) return rep;
  const Stopwatch watch;
  const SelfCheckTolerance tol = selfcheck_tolerance(opt.dtype);
  const ServingPath aten{false, false};
  std::unique_ptr<StepModel> ref = make(aten);
  LA_CHECK(ref != nullptr, "selfcheck: no reference model");
  rep.model = ref->describe();
  const auto script = selfcheck_script(ref->config(), opt.buckets, opt.seed);
  rep.steps = static_cast<int>(script.size());
  rep.serving = aten;
  for (const ServingPath& p : candidates) {
    if (p == aten) break;  // the reference itself: nothing to compare
    SelfCheckAttempt at;
    at.path = p;
    try {
      std::unique_ptr<StepModel> cand = make(p);
      LA_CHECK(cand != nullptr, "no model built");
      ref->truncate(0);
      at.detail = check_path(*ref, *cand, script, tol, ref->config().vocab);
    } catch (const std::exception& e) {
      at.detail = std::string("failed to start: ") + e.what();
    }
    at.ok = at.detail.empty();
    rep.attempts.push_back(at);
    if (!at.ok && opt.mode == SelfCheckMode::Strict)
      fail("--selfcheck strict: the ", p.name(), " path of ", rep.model, " disagrees with the ATen forward: ",
           at.detail);
    if (at.ok) {
      rep.serving = p;
      break;
    }
  }
  rep.seconds = watch.seconds();
  {
    std::lock_guard<std::mutex> g(reports_mutex());
    reports().push_back(rep);
  }
  return rep;
}

std::vector<SelfCheckReport> selfcheck_reports() {
  std::lock_guard<std::mutex> g(reports_mutex());
  return reports();
}

}  // namespace la
