package smp

import (
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/internal/memcopy"
	"github.com/gexgo/gexgo/internal/shm"
)

// Test access to the duo lines (duo_test.go, an external test package so
// that it can build in-process jobs with package loop).

// DuoWord returns the word of c's duo line with peer p for c's requests
// (and p's replies): 0 empty, else a message, a request if IsRequest.
func DuoWord(c *Conduit, p int) uint64 { return c.peers[p].duoOut.Word() }

// IsRequest reports whether a duo line word holds a request.
func IsRequest(w uint64) bool { return w&kindReq != 0 }

// DuoPeers returns the peers c sends requests to through duo lines.
func DuoPeers(c *Conduit) []int { return c.duoPeers[1] }

// RingsEmpty reports whether both of c's inbound rings (and their
// mailboxes) are empty. Only while nobody consumes them.
func RingsEmpty(c *Conduit) bool { return c.inbound[0].Empty() && c.inbound[1].Empty() }

// WriteDuoAsk stores word w and data into c's duo line towards p, as a
// peer that ignores the protocol could.
func WriteDuoAsk(c *Conduit, p int, w uint64, data []byte) {
	d := &c.peers[p].duoOut
	copy(d.Line()[8:], data)
	d.Commit(w)
}

// HoldAskClaim takes c's request senders' claim on its duo line towards
// p, as a sender between claim and commit holds it; it returns the release.
func HoldAskClaim(c *Conduit, p int) (release func()) {
	pr := &c.peers[p]
	if !pr.askClaim.CompareAndSwap(0, 1) {
		panic("claim held")
	}
	return func() { pr.askClaim.Store(0) }
}

// DuoSends is duoSends.
func DuoSends(noDuo bool, local, cpus int) bool { return duoSends(noDuo, local, cpus) }

// Pooled copies (bulk.go).
const (
	NTNever     = ntNever
	BulkDone    = bulkDone
	EnvNonTemp  = EnvNonTemporal
	NTThreshold = memcopy.Threshold
)

// NTFrom returns c's non-temporal length as it stands (0: not known yet;
// no header read).
func NTFrom(c *Conduit) int { return int(c.ntFrom.Load()) }

// NTFromNow is c.ntFromNow.
func NTFromNow(c *Conduit) int { return c.ntFromNow() }

// SetNTFrom forces c's non-temporal length.
func SetNTFrom(c *Conduit, n int) { c.ntFrom.Store(int32(n)) }

// BulkHeader returns the timing words of rank p's region header as c
// sees them: ask, step and outcome.
func BulkHeader(c *Conduit, p int) (ask, seq, from uint32) {
	b := c.peers[p].region.Bytes()
	return shm.Uint32At(b, offBulkAsk).Load(), shm.Uint32At(b, offBulkSeq).Load(), shm.Uint32At(b, offBulkFrom).Load()
}

// BulkTimeAlone runs the leader's side of the timing toward partner with
// step words nobody else writes, so the partner never answers: it must
// give up by the deadline.
func BulkTimeAlone(c *Conduit, partner int, budget time.Duration) [4][2]float64 {
	var mine, theirs atomic.Uint32
	return c.bulkTime(partner, &mine, &theirs, time.Now().Add(budget))
}

// BulkChoose is bulkChoose.
func BulkChoose(med [4][2]float64) int { return int(bulkChoose(med)) }

// PoolsIdle reports whether every buffer of c's pools toward p is free.
func PoolsIdle(c *Conduit, p int) bool {
	idle := true
	for _, pool := range c.peers[p].out {
		var got []int
		for range pool.NumBufs() {
			if i, _, ok := pool.TryAlloc(); ok {
				got = append(got, i)
			}
		}
		idle = idle && len(got) == pool.NumBufs()
		for _, i := range got {
			_ = pool.Free(i)
		}
	}
	return idle
}
