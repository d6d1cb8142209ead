// Whether this process is one rank of a job a launcher (mpirun, srun) started, from the environment alone: no MPI
// (src/parallel/launcher.cpp, in la_core; the communicators, src/dist, ask it before initialising MPI).
#pragma once

namespace la {

// The job's rank and size as the launcher announced them (Open MPI, PMIx, PMI, Slurm variables), before or
// without MPI: -1 / 0 when not launched by one. launched_by_mpi_launcher: any of OMPI_COMM_WORLD_{SIZE,RANK},
// PMIX_RANK, PMI_{RANK,SIZE}, SLURM_STEP_NUM_TASKS is set, or SLURM_PROCID with SLURM_NTASKS > 1 (src/parallel/
// launcher.cpp, in la_core: no MPI needed to ask).
// An integer environment variable; `dflt` when unset, empty or not a whole number (src/parallel/launcher.cpp).
int env_int(const char* name, int dflt);
int launcher_rank();
int launcher_size();
bool launched_by_mpi_launcher();

}  // namespace la
