// Long-job options of `lookahead generate` (see job_options.h).
#include "job_options.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "lookahead/util/error.h"

namespace po = boost::program_options;
using json = nlohmann::json;

namespace la::cli {

const char* const kJobHelp =
    "\nBatch jobs:\n"
    "  SIGINT or SIGTERM (Ctrl-C, scancel, Slurm's --signal, mpirun/srun forwarding it to the ranks; any rank)\n"
    "  stops the run cleanly: the request in flight finishes if it can within --stop-grace seconds, else it is\n"
    "  dropped (never half-written); every finished record is in --output; the ranks are released. A second\n"
    "  signal exits at once. Continue with --resume.\n"
    "  --trie-state / --pool-state / --suffix-state are saved (atomically) after every finished request, so even a\n"
    "  job killed outright (SIGKILL, a lost node) keeps the state of every request in --output.\n"
    "Exit status: 0 done; 1 error; 2 usage error; 130 interrupted by SIGINT, 143 by SIGTERM (128 + signal;\n"
    "  under plain mpirun the job's status is mpirun's own, 1; launch/mpirun.sh and srun pass 130/143 on).\n";

void add_job_options(po::options_description& d, JobOptions& b) {
  d.add_options()
      ("resume", po::bool_switch(&b.resume),
       "continue an interrupted run: keep the records already in --output, skip their ids (a cut-off last "
       "line is dropped and redone) and append the rest")
      ("overwrite", po::bool_switch(&b.overwrite),
       "replace an existing --output (without --resume or --overwrite a non-empty --output is an error)")
      ("progress-interval", po::value(&b.progress_interval)->default_value(30),
       "--input runs: prompts done/total, tokens/s and time left on stderr, a line every S seconds (one "
       "updating line when stderr is a terminal); rank 0 only; 0 or --quiet: none")
      ("stop-grace", po::value(&b.stop_grace)->default_value(0.5),
       "on SIGINT/SIGTERM: seconds the request in flight may still take; one that cannot finish in time is "
       "dropped at once (--resume redoes it)")
      ("rss-every", po::value(&b.rss_every)->default_value(0),
       "print resident memory (VmRSS, VmHWM) and the strategy's state size to stderr before the first prompt "
       "and after every N prompts (0: off)");
}

void JobOptions::validate() const {
  LA_CHECK(!(resume && overwrite), "give only one of --resume and --overwrite");
  LA_CHECK(std::isfinite(progress_interval) && progress_interval >= 0, "--progress-interval must be >= 0 (got ",
           progress_interval, ")");
  LA_CHECK(std::isfinite(stop_grace) && stop_grace >= 0, "--stop-grace must be >= 0 (got ", stop_grace, ")");
  LA_CHECK(rss_every >= 0, "--rss-every must be >= 0 (got ", rss_every, ")");
}

std::vector<char> resumed_prompts(const JsonlOutput& out, const std::string& output_path,
                                  const std::vector<json>& ids, const std::vector<std::string>& texts) {
  std::vector<char> skip(ids.size(), 0);
  if (out.done().empty()) return skip;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < ids.size(); ++i)
    LA_CHECK(index.emplace(id_key(ids[i]), i).second, "--resume: the input holds id ", id_key(ids[i]),
             " more than once (records are matched by id)");
  for (const auto& [key, rec] : out.done()) {
    const auto it = index.find(key);
    LA_CHECK(it != index.end(), "--resume: '", output_path, "' holds id ", key,
             " which is not in the input (another job's output?)");
    LA_CHECK(!rec.contains("prompt") || !rec["prompt"].is_string() || rec["prompt"] == texts[it->second],
             "--resume: '", output_path, "' holds id ", key, " with a different prompt than the input's");
    skip[it->second] = 1;
  }
  return skip;
}

std::string memory_line(const std::string& tag, size_t prompts, const std::map<std::string, double>& counters) {
  long rss = -1, hwm = -1;
  std::ifstream st("/proc/self/status");
  std::string key;
  while (st >> key) {
    if (key == "VmRSS:") st >> rss;
    else if (key == "VmHWM:") st >> hwm;
    st.ignore(1 << 16, '\n');
  }
  std::ostringstream o;
  o << tag << "memory after " << prompts << " prompts: VmRSS " << rss << " kB, VmHWM " << hwm << " kB";
  const char* sizes[] = {"trie_nodes", "trie_capacity", "pool_ngrams", "pool_keys", "pool_phrases"};
  for (const char* k : sizes) {
    const auto it = counters.find(k);
    if (it != counters.end()) o << "; " << k << " " << static_cast<long long>(it->second);
  }
  return o.str();
}

}  // namespace la::cli
