#include "run_setup.h"

#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "lookahead/decode/cost_calibration.h"
#include "lookahead/engine/llama.h"
#include "lookahead/model/model_dir.h"
#include "lookahead/dist/agreement.h"
#include "lookahead/dist/worker.h"
#include "lookahead/util/error.h"
#include "lookahead/util/files.h"
#include "run_executor.h"
#include "signals.h"

namespace la::cli {
namespace {

// The draft model must share the target's tokenizer: same vocabulary, and byte-identical tokenizer files where
// both have one.
void check_draft_matches(const ModelConfig& target, const GenerateOptions& o, const std::string& draft_dir) {
  const ModelConfig dc = model_config_of(draft_dir);
  LA_CHECK(dc.vocab == target.vocab, "draft model vocabulary (", dc.vocab, ") differs from the target's (",
           target.vocab, "): they must share a tokenizer");
  for (const char* f : {"/tokenizer.model", "/tokenizer.json"}) {
    const std::string ttok = tokenizer_dir_of(o.load.model, o.tokenizer_dir) + f;
    const std::string dtok = draft_dir + f;
    if (file_exists(ttok) && file_exists(dtok))
      LA_CHECK(read_file(ttok) == read_file(dtok), "draft model tokenizer differs from the target's (", dtok,
               " vs ", ttok, ")");
  }
}

}  // namespace

Ranks open_ranks(GenerateOptions& o) {
  Ranks r;
  r.comm = make_comm(o.comm, o.load.device);
  LA_CHECK(o.simulate_ranks == 0 || r.comm->size() == 1, "--simulate-ranks runs in one process; this job has ",
           r.comm->size(), " ranks (launch it without mpirun/srun)");
  r.root = r.comm->rank() == 0;
  r.rank_log = !o.quiet;
  r.tag = r.comm->size() > 1 ? "[rank " + std::to_string(r.comm->rank()) + "] " : "[lookahead] ";
  if (!r.root) o.quiet = true;
  if (r.comm->size() > 1 && o.load.device == "cuda") o.load.device_index = rank_cuda_device(r.comm->local_rank());
  r.group = r.comm.get();
  r.owners = {0};
  return r;
}

void split_groups(Ranks& r, GenerateOptions& o) {
  const int world = r.comm->size(), me = r.comm->rank();
  const int k = o.lp_k > 0 ? o.lp_k : o.has_prompt ? world : 1;
  if (world % k != 0) {
    // One error line, from rank 0: the others wait in a barrier rank 0 never joins until its abort ends them.
    if (me != 0) r.comm->barrier();
    fail("--lp-size ", k, " does not divide the job's ", world, " rank(s) into groups of ", k,
         " (launch a multiple of ", k, " ranks, or choose a divisor of ", world, ")");
  }
  r.lp = k;
  r.groups = world / k;
  r.owners.clear();
  for (int g = 0; g < r.groups; ++g) r.owners.push_back(g * k);
  r.owner = me % k == 0;
  if (r.groups > 1) {
    r.own = r.comm->split(me / k, me);
    r.group = r.own.get();
  }
  if (!r.root && r.owner) {  // every owner starts from the state files; rank 0 alone writes them (its state merges
    read_only_strategy_state(o.strategy);  // every group's finished requests: generate.cpp)
  }
}

Models open_model_files(const GenerateOptions& o) {
  Models m;
  m.cfg = model_config_of(o.load.model);
  m.tokenizer_files.emplace(tokenizer_files(o.load.model, o.tokenizer_dir));
  m.tok = open_tokenizer(*m.tokenizer_files, o.load.model, o.tokenizer_dir, &m.cfg);
  return m;
}

void load_weights(Models& m, const GenerateOptions& o, bool root) {
  m.model = load_llama(o.load);
  const std::string draft = strategy_draft_model(o.strategy);
  if (draft.empty()) return;
  LoadOptions dl = o.load;
  dl.model = draft;
  check_draft_matches(m.cfg, o, dl.model);
  if (root) m.draft = load_llama(dl);
}

void set_strategy_identity(GenerateOptions& o, const Models& m) {
  ModelIdentity id;
  id.vocab = static_cast<int32_t>(m.cfg.vocab);
  id.hash = [&] {  // the weights and the tokenizer files
    uint64_t h = m.model->checksum();
    const std::string& dir = m.tokenizer_files->path();
    for (const char* f : {"/tokenizer.model", "/tokenizer.json"}) {
      if (!file_exists(dir + f)) continue;
      const std::string t = read_file(dir + f);
      h = (h ^ fnv1a64(t.data(), t.size())) * 1099511628211ULL;
    }
    return h;
  };
  bind_strategy_model(o.strategy, id);
}

void check_ranks_agree(Comm& comm, const StepModel& model, const GenerateOptions& o, size_t prompts) {
  if (comm.size() == 1) return;
  const GenParams& g = o.gen;
  std::ostringstream params;
  params << o.load.dtype << "|" << g.max_new_tokens << "|" << g.sample.temperature << "|" << g.sample.top_k << "|"
         << g.sample.top_p << "|" << g.sample.seed << "|" << o.strategy.name << "|" << prompts << "|lp " << o.lp_size;
  check_agreement(comm, model.checksum(), params.str());
}

RankOptions rank_options(const GenerateOptions& o, const std::string& tag, const Comm* group) {
  RankOptions d;
  d.group.rank_timeout_s = o.rank_timeout_s;
  d.group.stop_signal = &stop_signal_flag();  // a worker reports its own signal; rank 0 then stops the job cleanly
  d.par.collective_latency_s = o.collective_latency_us * 1e-6;
  d.par.record_limit = o.simulate_ranks > 0 ? 20000 : 0;  // the simulation's per-step table (short runs only)
  d.par.on_worker_stop = [tag, group](int sig, int r) {
    const int wr = group ? group->world_rank_of(r) : r;
    if (stop_signal() == 0) std::cerr << (tag + "rank " + std::to_string(wr) + " received " + signal_name(sig) + "\n");
    request_stop(sig);
  };
  return d;
}

void serve_rank_zero(Comm& comm, StepModel& model, const CommGroupOptions& opt, const Ranks& r) {
  if (r.rank_log)  // one write per line, so ranks' lines do not interleave
    std::cerr << (r.tag + "model " + model.describe() + " loaded; serving rank " +
                  std::to_string(comm.world_rank_of(0)) + " (" + std::to_string(comm.size()) + " ranks, " +
                  comm.backend() + ")\n");
  LocalExecutor wexec(model);
  run_worker(comm, wexec, opt);
}

void print_loaded(const Ranks& r, const StepModel& model, const Strategy& strategy, bool adaptive, double load_s) {
  std::ostringstream line;
  line << r.tag << "model " << model.describe() << " loaded in " << std::fixed << std::setprecision(2) << load_s
       << " s; strategy " << strategy.name();
  if (strategy.max_draft_budget() > 0) line << (adaptive ? " (adaptive drafting" : " (fixed drafts");
  if (strategy.name() == StrategyOptions{}.name) line << (strategy.max_draft_budget() > 0 ? ", the default" : " (the default");
  if (strategy.max_draft_budget() > 0 || strategy.name() == StrategyOptions{}.name) line << ")";
  if (r.group->size() > 1) line << "; " << r.group->size() << " ranks, " << r.group->backend();
  std::cerr << line.str() + "\n";
}

Adaptive attach_adaptive(const GenerateOptions& o, StepModel& model, Strategy& strategy, RunExecutor& exec,
                         Generator& gen, int batch, const ForwardCostModel* known) {
  Adaptive a;
  if (!o.strategy.adaptive || strategy.max_draft_budget() <= 0) return a;
  const int top = strategy.max_draft_budget();
  // A one-thread CPU forward is timed on the thread's CPU clock (cost_model.h: preemption is not cost).
  const CostClock clock = o.load.device == "cpu" && o.load.threads == 1 ? CostClock::ThreadCpu : CostClock::Wall;
  a.cost = std::make_unique<StepCostModel>(
      calibrate_forward_cost(model, std::min(256, batch * (1 + top + strategy.lookahead_nodes(top))), 3, clock, known),
      exec.ranks,
      o.collective_latency_us * 1e-6);
  a.cost->set_clock(clock);
  a.controller = std::make_unique<DraftController>(strategy, *a.cost);
  gen.set_controller(a.controller.get());
  return a;
}

}  // namespace la::cli
