// Options and helpers of `lookahead generate` for long jobs: --resume / --overwrite of --output, progress
// lines, the clean stop on SIGINT/SIGTERM (--stop-grace) and resident-memory reports (--rss-every). Kept out of
// generate.cpp so that file stays the flow of one run.
#pragma once
#include <boost/program_options.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "output_file.h"

namespace la::cli {

struct JobOptions {
  bool resume = false;
  bool overwrite = false;
  double progress_interval = 30;  // seconds between progress lines when stderr is not a terminal; 0: none
  double stop_grace = 0.5;        // seconds the request in flight may still take after SIGINT/SIGTERM
  int rss_every = 0;              // memory line every N prompts (0: off)
  void validate() const;          // throws la::Error
  OutputMode output_mode() const { return resume ? OutputMode::Resume : overwrite ? OutputMode::Overwrite : OutputMode::Fresh; }
};

void add_job_options(boost::program_options::options_description& d, JobOptions& b);
// The --help epilogue about exit statuses and batch jobs.
extern const char* const kJobHelp;

// --resume: which prompts are already in the output. ids[i], texts[i]: prompt i's id and text. Every record in the
// file must be one of these ids with the same prompt text (else an error naming the file and id); the input's ids
// must be unique. Returns skip[i] = 1 for the prompts already written.
std::vector<char> resumed_prompts(const JsonlOutput& out, const std::string& output_path,
                                  const std::vector<nlohmann::json>& ids, const std::vector<std::string>& texts);

// "[tag]memory after N prompts: VmRSS X kB, VmHWM Y kB; <state-size counters>" (VmRSS/VmHWM from
// /proc/self/status; -1 where unavailable).
std::string memory_line(const std::string& tag, size_t prompts, const std::map<std::string, double>& counters);

}  // namespace la::cli
