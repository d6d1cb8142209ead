// Launcher detection: whether this process is one rank of a job started by mpirun/srun (Open MPI, PMIx, PMI,
// Slurm step variables). Pure environment reading, no MPI: a process started by hand must never call MPI_Init
// (it costs start-up time, needs a working MPI runtime, and is impossible in builds without MPI).
#include <cstdlib>
#include <initializer_list>

#include "lookahead/parallel/launcher.h"

namespace la {

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return end && *end == 0 ? static_cast<int>(x) : dflt;
}

namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

}  // namespace

int launcher_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const int r = env_int(v, -1);
    if (r >= 0) return r;
  }
  if (env_set("SLURM_STEP_NUM_TASKS")) return env_int("SLURM_PROCID", -1);
  return -1;
}

int launcher_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const int r = env_int(v, 0);
    if (r > 0) return r;
  }
  if (env_set("PMIX_RANK")) return env_int("SLURM_STEP_NUM_TASKS", env_int("SLURM_NTASKS", 0));
  return env_int("SLURM_STEP_NUM_TASKS", 0);
}

bool launched_by_mpi_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                        "SLURM_STEP_NUM_TASKS"})
    if (env_set(v)) return true;
  // Inside an allocation but not an srun step (e.g. the batch script itself): a job only if several tasks.
  return env_set("SLURM_PROCID") && env_int("SLURM_NTASKS", 1) > 1;
}

}  // namespace la
