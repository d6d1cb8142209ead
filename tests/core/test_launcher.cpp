// Launcher detection (src/parallel/launcher.cpp): which environments make a process one rank of an MPI job. A process
// started by hand must be detected as such, so that it uses the single-process communicator and never MPI_Init.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>
#include <string>

#include "lookahead/parallel/launcher.h"

namespace {

const char* kVars[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMIX_RANK",
                       "PMI_RANK", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID",
                       "SLURM_LOCALID"};

// Sets exactly `env` among the launcher variables for the test's lifetime, restoring the old values after.
class Env {
 public:
  explicit Env(const std::map<std::string, std::string>& env) {
    for (const char* v : kVars) {
      if (const char* old = getenv(v)) saved_[v] = old;
      unsetenv(v);
    }
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  }
  ~Env() {
    for (const char* v : kVars) unsetenv(v);
    for (auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_;
};

}  // namespace

TEST(Launcher, NoLauncherEnvironmentIsOneProcess) {
  Env e({});
  EXPECT_FALSE(la::launched_by_mpi_launcher());
  EXPECT_EQ(la::launcher_rank(), -1);
  EXPECT_EQ(la::launcher_size(), 0);
}

TEST(Launcher, OpenMpiPmiAndPmix) {
  {
    Env e({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"}});
    EXPECT_TRUE(la::launched_by_mpi_launcher());
    EXPECT_EQ(la::launcher_rank(), 2);
    EXPECT_EQ(la::launcher_size(), 4);
  }
  {
    Env e({{"OMPI_COMM_WORLD_SIZE", "1"}, {"OMPI_COMM_WORLD_RANK", "0"}});  // mpirun -np 1 is still a job
    EXPECT_TRUE(la::launched_by_mpi_launcher());
    EXPECT_EQ(la::launcher_size(), 1);
  }
  {
    Env e({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"}});
    EXPECT_TRUE(la::launched_by_mpi_launcher());
    EXPECT_EQ(la::launcher_rank(), 1);
    EXPECT_EQ(la::launcher_size(), 3);
  }
  {
    Env e({{"PMIX_RANK", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}});
    EXPECT_TRUE(la::launched_by_mpi_launcher());
    EXPECT_EQ(la::launcher_size(), 2);
  }
}

TEST(Launcher, Slurm) {
  {
    Env e({{"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});  // srun step
    EXPECT_TRUE(la::launched_by_mpi_launcher());
    EXPECT_EQ(la::launcher_rank(), 1);
    EXPECT_EQ(la::launcher_size(), 2);
  }
  {
    // A batch script or salloc shell with one task: not a job of several ranks.
    Env e({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
    EXPECT_FALSE(la::launched_by_mpi_launcher());
  }
  {
    Env e({{"SLURM_JOB_ID", "7"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}});
    EXPECT_TRUE(la::launched_by_mpi_launcher());
  }
  {
    Env e({{"SLURM_JOB_ID", "7"}, {"SLURM_LOCALID", "0"}});  // allocation variables alone: one process
    EXPECT_FALSE(la::launched_by_mpi_launcher());
  }
  {
    Env e(std::map<std::string, std::string>{{"OMPI_COMM_WORLD_SIZE", ""}});  // empty values do not count
    EXPECT_FALSE(la::launched_by_mpi_launcher());
  }
}
