package launch

// What users of mpirun expect of a launcher, beyond starting N ranks:
// standard input reaches rank 0 (the others read /dev/null), each rank's
// output can go to a file of its own, and ranks can be bound to CPUs with
// GOMAXPROCS set to their share.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// rankStdin is rank r's standard input: head (the job secret's line for a
// remote shell, or nil) followed, for rank 0, by Config.Stdin; def
// (/dev/null) when there is neither.
func (j *job) rankStdin(r int, head []byte, def *os.File) (*os.File, error) {
	user := j.cfg.Stdin
	if r != 0 {
		user = nil
	}
	if head == nil && user == nil {
		return def, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	if len(head) > 0 {
		// A line of a few dozen bytes fits the pipe's buffer: no reader needed yet.
		if _, err := pw.Write(head); err != nil {
			pr.Close()
			pw.Close()
			return nil, err
		}
	}
	if user == nil {
		pw.Close()
		return pr, nil
	}
	go func() {
		// Ends at the input's EOF, or with EPIPE once rank 0 exited or
		// closed its input (the launcher closes its copy of the read end
		// after the start).
		io.Copy(pw, user)
		pw.Close()
	}()
	return pr, nil
}

// localStdin is rank r's standard input when it is started here: rankStdin
// without a head; def for ranks started through a remote shell, whose input
// the remote branch makes (with the secret first), so that only one copy
// ever reads Config.Stdin.
func (j *job) localStdin(r int, def *os.File) (*os.File, error) {
	if len(j.cfg.Hosts) > 0 {
		return def, nil
	}
	return j.rankStdin(r, nil, def)
}

// rankWriters are where rank r's standard output and error go: the job's
// Stdout and Stderr, or OutputDir/rank.R for both.
func (j *job) rankWriters(r int) (stdout, stderr io.Writer) {
	if j.cfg.OutputDir == "" {
		return j.out.stdout, j.out.stderr
	}
	f, err := openRankOutput(j.cfg.OutputDir, r)
	if err != nil {
		j.out.say(fmt.Sprintf("output of rank %d goes to the terminal: %v", r, err))
		return j.out.stdout, j.out.stderr
	}
	j.out.keep(f)
	return f, f
}

// openRankOutput creates dir/rank.R.
func openRankOutput(dir string, r int) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(RankOutputFile(dir, r), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
}

// RankOutputFile is the file that Config.OutputDir gives rank r.
func RankOutputFile(dir string, r int) string {
	return filepath.Join(dir, "rank."+strconv.Itoa(r))
}

// keep records a file the forwarders write to; wait closes it once they are
// done.
func (o *output) keep(f *os.File) {
	o.fmu.Lock()
	o.outFiles = append(o.outFiles, f)
	o.fmu.Unlock()
}

// closeOutFiles closes the files of keep (after the forwarders ended).
func (o *output) closeOutFiles() {
	o.fmu.Lock()
	defer o.fmu.Unlock()
	for _, f := range o.outFiles {
		f.Close()
	}
	o.outFiles = nil
}

// startProcess starts rank r's process. It runs on the spawner's locked
// thread: with BindCores, it sets that thread's CPU affinity to the rank's
// CPUs around the fork (a child inherits the affinity of the thread that
// forked it, so the rank is bound from its first instruction and the Go
// runtime in it sizes itself accordingly), then restores it.
func (j *job) startProcess(r int, exe string, argv []string, attr *os.ProcAttr) (*os.Process, error) {
	if !j.cfg.BindCores || len(j.cfg.Hosts) > 0 {
		return os.StartProcess(exe, argv, attr)
	}
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		return nil, fmt.Errorf("--bind-to core: %v", err)
	}
	cpus := RankCPUs(cpuList(&orig), r, j.cfg.N)
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	if lookupEnv(attr.Env, "GOMAXPROCS", "") == "" {
		a := *attr
		a.Env = append(slices.Clip(attr.Env), "GOMAXPROCS="+strconv.Itoa(len(cpus)))
		attr = &a
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("--bind-to core: binding rank %d to CPUs %v: %v", r, cpus, err)
	}
	defer unix.SchedSetaffinity(0, &orig)
	return os.StartProcess(exe, argv, attr)
}

// cpuList is the CPUs of s in ascending order.
func cpuList(s *unix.CPUSet) []int {
	var cpus []int
	for c := 0; c < len(s)*64; c++ {
		if s.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// RankCPUs is the CPUs rank r of n gets out of cpus under --bind-to core: the
// r-th of n consecutive blocks (sizes differ by at most one), or, with more
// ranks than CPUs, the single CPU cpus[r mod len(cpus)].
func RankCPUs(cpus []int, r, n int) []int {
	c := len(cpus)
	if c == 0 {
		return nil
	}
	if n >= c {
		return []int{cpus[r%c]}
	}
	return cpus[r*c/n : (r+1)*c/n]
}

// forwardedToRemote reports whether a variable of the launcher's environment
// travels to ranks started through a remote shell: the library's own GEX_*
// and GASNet's GASNET_* (GASNET_MAX_SEGSIZE, GASNET_SUPERNODE_MAXSIZE, ...),
// as GASNet's ssh spawner forwards them. Anything else goes with
// Config.Env (gexrun -x).
func forwardedToRemote(kv string) bool {
	return strings.HasPrefix(kv, "GEX_") || strings.HasPrefix(kv, "GASNET_")
}
