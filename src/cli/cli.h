#pragma once
namespace la::cli {
int cmd_generate(int argc, char** argv);
int cmd_bench_forward(int argc, char** argv);
int cmd_save_model(int argc, char** argv);
int cmd_score(int argc, char** argv);
}  // namespace la::cli
