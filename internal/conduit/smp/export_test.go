package smp

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
