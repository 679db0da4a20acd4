package boot

import (
	"os"
	"strconv"
)

// LauncherEnv reads the rank, size and local rank that common launchers put
// in the environment of every process: Open MPI's mpirun
// (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK)
// or Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), in that order.
// ok is false unless rank and size of one launcher are present and valid
// (0 <= rank < size); localRank is -1 when its variable is absent or invalid.
//
// These variables give no key-value exchange, so FromEnv does not bootstrap
// from them alone: PMIFromEnv uses them to cross-check the rank and size the
// PMI server reports.
func LauncherEnv() (rank, size, localRank int, ok bool) {
	for _, names := range [][3]string{
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
		{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
	} {
		r, err1 := strconv.Atoi(os.Getenv(names[0]))
		s, err2 := strconv.Atoi(os.Getenv(names[1]))
		if err1 != nil || err2 != nil || s < 1 || r < 0 || r >= s {
			continue
		}
		l, err := strconv.Atoi(os.Getenv(names[2]))
		if err != nil || l < 0 || l >= s {
			l = -1
		}
		return r, s, l, true
	}
	return 0, 0, -1, false
}
