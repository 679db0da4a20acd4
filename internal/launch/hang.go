package launch

import (
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
)

// progressEnv adds GEX_PROGRESS_MS to every rank's environment when the job
// watches for hangs: ranks then report their progress four times per
// HangTimeout.
func (j *job) progressEnv(envs [][]string) [][]string {
	h := j.cfg.HangTimeout
	if h <= 0 {
		return envs
	}
	ms := max(h/4/time.Millisecond, 5)
	for r := range envs {
		envs[r] = dedupEnv(append(envs[r], boot.EnvProgressMS+"="+strconv.Itoa(int(ms))))
	}
	return envs
}

// checkHang ends the job when no rank still in it has made communication
// progress for HangTimeout and at least one of them waits in the library (a
// job whose ranks all compute is not hung): one line, then a line per rank
// saying what it waits on (the op and the peer, from its last report), then
// SIGQUIT to every rank, which prints its goroutine stacks labelled with its
// rank and exits; SIGKILL after Grace; code CodeTimeout.
func (j *job) checkHang() {
	h := j.cfg.HangTimeout
	if h <= 0 || j.ending != running {
		return
	}
	prog := j.srv.Progress()
	now := time.Now()
	var in []int
	waiting := false
	for r, p := range prog {
		if !p.Joined || p.Finalized || j.exited[r] {
			continue
		}
		if now.Sub(p.Changed) < h {
			return // someone moved
		}
		in = append(in, r)
		waiting = waiting || p.Waiting != ""
	}
	if len(in) == 0 || !waiting {
		return // nobody waits in the library: computing is not a hang
	}
	j.finish(endTimeout, CodeTimeout, fmt.Sprintf("no rank made communication progress for %v; dumping the goroutine stacks of %s and ending the job", h, plural(len(in), "rank")))
	for _, r := range in {
		what := prog[r].Waiting
		if what == "" {
			what = "no gexgo wait (computing, or blocked outside the library)"
		}
		j.out.say(fmt.Sprintf("rank %d waits in %s", r, what))
	}
	for _, rp := range j.ranks {
		rp.signal(syscall.SIGQUIT)
	}
	j.armGrace()
}

// quit handles SIGQUIT sent to the launcher: it is forwarded to every rank,
// which prints its goroutine stacks labelled with its rank and exits (gex
// ranks; other programs do what SIGQUIT does to them); ranks left after
// Grace are killed; a second signal kills at once.
func (j *job) quit() {
	j.sigs++
	if j.ending == running {
		j.ending, j.sig = endSignal, syscall.SIGQUIT
		j.summary = fmt.Sprintf("received SIGQUIT; asked %s for their goroutine stacks", plural(j.alive, "rank"))
	}
	j.out.say(fmt.Sprintf("received SIGQUIT; asking %s for their goroutine stacks", plural(j.alive, "rank")))
	for _, r := range j.ranks {
		r.signal(syscall.SIGQUIT)
	}
	j.armGrace()
}
