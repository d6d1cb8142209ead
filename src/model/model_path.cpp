#include "lookahead/model/model_path.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "lookahead/util/error.h"
#include "lookahead/util/files.h"

namespace la {

std::string models_cache_dir() {
  const char* deps = std::getenv("LOOKAHEAD_DEPS");
  if (deps && *deps) return std::string(deps) + "/models";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/lookahead/models";
}

std::string resolve_model_path(const std::string& arg, const char* flag) {
  if (arg.empty() || arg.rfind("random:", 0) == 0 || is_directory(arg)) return arg;
  if (arg.find('/') != std::string::npos || arg == "." || arg == "..") return arg;
  if (file_exists(arg)) return arg;  // a model file here (FILE.gguf)
  const std::string cache = models_cache_dir();
  const std::string cached = cache + "/" + arg;
  if (is_directory(cached) || file_exists(cached)) return cached;  // a directory, or a model file (.gguf)
  // A bare name also finds NAME.gguf there (launch/setup.sh links the demo model's GGUF as
  // SmolLM2-135M-Instruct.gguf); a directory of the same name comes first.
  if (file_exists(cached + ".gguf")) return cached + ".gguf";
  std::vector<std::string> have;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(cache, ec))
    if ((e.is_directory(ec) || e.path().extension() == ".gguf") && e.path().filename().string()[0] != '.')
      have.push_back(e.path().filename().string());
  std::sort(have.begin(), have.end());
  std::string list;
  for (const auto& h : have) list += (list.empty() ? "" : ", ") + h;
  fail(flag, " '", arg, "' not found: no directory './", arg, "' and no '", cached, "' (",
       have.empty() ? std::string("the model cache is empty") : "the model cache holds: " + list,
       "; launch/setup.sh links SmolLM2-135M-Instruct.gguf there)");
}

}  // namespace la
