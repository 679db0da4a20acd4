package launch

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/gexgo/gexgo/internal/boot"
	"golang.org/x/sys/unix"
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

// processGroup returns the process group of pid, from /proc/<pid>/stat.
func processGroup(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("launch: malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return 0, errors.New("launch: malformed /proc stat")
	}
	return strconv.Atoi(f[2])
}

// killStragglers kills the processes that still carry the job's id in their
// environment once every rank has been reaped: descendants of ranks that
// left their rank's process group (setsid, setpgid), which the group kill did
// not reach. It returns those that were outside every rank's group; members
// of rank groups found here were already SIGKILLed and are just dying.
func killStragglers(jobID string, rankPIDs map[int]bool) []int {
	pids, _ := JobProcesses(jobID)
	var escaped []int
	for _, pid := range pids {
		pgrp, err := processGroup(pid)
		if err != nil {
			continue // gone
		}
		unix.Kill(pid, unix.SIGKILL)
		if !rankPIDs[pgrp] {
			escaped = append(escaped, pid)
		}
	}
	return escaped
}
