package smp

import "github.com/gexgo/gexgo/internal/shm"

// Test access to the duo lines (duo_test.go, an external test package so
// that it can build in-process jobs with package loop).

// DuoWords returns c's duo line with peer p for c's requests: its asker
// half's word (c's request) and its answerer half's (p's reply).
func DuoWords(c *Conduit, p int) (ask, answer uint64) {
	d := &c.peers[p].duoOut
	return d.Word(shm.DuoAsk), d.Word(shm.DuoAnswer)
}

// DuoPeers returns the peers c shares duo lines with.
func DuoPeers(c *Conduit) []int { return c.duoPeers }

// RingsEmpty reports whether both of c's inbound rings (and their
// mailboxes) are empty. Only while nobody consumes them.
func RingsEmpty(c *Conduit) bool { return c.inbound[0].Empty() && c.inbound[1].Empty() }

// WriteDuoAsk stores word w and data into c's asker half towards p, as a
// peer that ignores the protocol could.
func WriteDuoAsk(c *Conduit, p int, w uint64, data []byte) {
	d := &c.peers[p].duoOut
	copy(d.Line()[8:shm.DuoHalf], data)
	d.Commit(shm.DuoAsk, w)
}

// HoldAskClaim takes c's request senders' claim on its asker half towards
// p, as a sender between claim and commit holds it; it returns the release.
func HoldAskClaim(c *Conduit, p int) (release func()) {
	pr := &c.peers[p]
	if !pr.askClaim.CompareAndSwap(0, 1) {
		panic("claim held")
	}
	return func() { pr.askClaim.Store(0) }
}
