// Where a --model / --draft-model / --tokenizer argument points. No libtorch.
#pragma once
#include <string>

namespace la {

// ${LOOKAHEAD_DEPS:-$HOME/.cache/lookahead}/models: where launch/setup.sh puts converted models.
std::string models_cache_dir();

// "random:..." and existing directories are returned as given; a path with a '/' that does not exist is returned
// as given too (the loader names it). A bare NAME (no '/') that is not a directory here resolves to
// models_cache_dir()/NAME, as Hugging Face ids resolve to their cache; if that is missing too, throws la::Error
// naming both places looked in and the models the cache holds. `flag` names the option in the message.
std::string resolve_model_path(const std::string& arg, const char* flag = "--model");

}  // namespace la
