package spmdtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/launch"
)

// The test binary's TestMain (spmdtest_test.go) makes it sleep when
// SPMDTEST_HELPER=sleep: a process of a fake job.

func TestLeftoversDetected(t *testing.T) {
	id := launch.NewJobID()
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), "SPMDTEST_HELPER=sleep", "GEX_JOBID="+id)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer c.Process.Kill()
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); len(pids) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		pids, _ = launch.JobProcesses(id) // wait for exec to put the environment in place
	}
	got := leftovers(id)
	if len(got) != 1 || got[0] != c.Process.Pid {
		t.Fatalf("leftovers = %v, want [%d]", got, c.Process.Pid)
	}
	if err := c.Wait(); err == nil {
		t.Errorf("leftovers did not kill %d", c.Process.Pid)
	}
}

func TestShmFilesDetected(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm")
	}
	id := launch.NewJobID()
	f := filepath.Join("/dev/shm", "gexgo-"+id+"-x")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := shmFiles(id); len(got) != 1 || got[0] != f {
		t.Errorf("shmFiles = %v, want [%s]", got, f)
	}
	if _, err := os.Stat(f); !os.IsNotExist(err) {
		t.Errorf("%s not removed", f)
		os.Remove(f)
	}
}
