package launch

import (
	"bytes"
	"os"
	"strconv"

	"github.com/gexgo/gexgo/internal/boot"
)

// JobProcesses returns the pids of the processes whose environment holds
// GEX_JOBID=jobID, the caller excluded: after Run returns there should be
// none. Processes whose environment cannot be read (other users, zombies)
// are not seen.
func JobProcesses(jobID string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	want := []byte(boot.EnvJobID + "=" + jobID)
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}
