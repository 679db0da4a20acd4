package smp

import "github.com/gexgo/gexgo/internal/shm"

// offFenced is the AM region header word that says how its owner sleeps:
// fencedYes if the owner's process registered for membarrier(2)
// MEMBARRIER_CMD_GLOBAL_EXPEDITED and its Bell.Sleep issues that barrier
// after announcing itself (shm.Bell.WithHeavyFence), 0 otherwise. The owner
// writes it when it creates the region, before the regions are exchanged,
// and never changes it.
//
// A producer commits to a peer's rings with a release store (no locked
// instruction: shm.MsgRing.SetReleaseCommit) only if the peer's word says
// fencedYes and its own process registered too (the barrier reaches only
// registered processes' threads); otherwise with the sequentially
// consistent store. So ranks of one neighbourhood need not agree: each pair
// uses the fast commit only where both sides make it safe, and a process
// where membarrier is missing (an old kernel, a seccomp filter in a
// container, registration refused, or shm.EnvNoMembarrier set) keeps the
// seq-cst commit toward everyone and is sent to with it. The argument for
// why no wake-up is lost is at shm.Bell.Sleep.
const (
	offFenced = 24
	fencedYes = 1
)

// setupFence registers this process for membarrier (once per process),
// records the outcome in this rank's region header b, and makes c.bell
// issue the barrier before each sleep where it can.
func (c *Conduit) setupFence(b []byte) {
	c.fenced = shm.EnableHeavyFence()
	if c.fenced {
		shm.Uint32At(b, offFenced).Store(fencedYes)
		c.bell = c.bell.WithHeavyFence()
	}
}

// attachFence makes pr's ring views (and duo lines) commit with a release store when both
// this process and pr's owner (its region header b) use the barrier.
func (c *Conduit) attachFence(pr *peer, b []byte) {
	if !c.fenced || shm.Uint32At(b, offFenced).Load() != fencedYes {
		return
	}
	for _, q := range pr.ring {
		q.SetReleaseCommit()
	}
	pr.duoOut.SetReleaseCommit() // both duo halves we write are read by pr's owner
	pr.duoIn.SetReleaseCommit()
}
