//go:build race

package ptlnet

// rxWaiting reports whether the peer's ring may hold a message. Under the
// race detector it asks as the consumer (the lock-free look of
// shm.MsgRing.Waiting reads slot words that the peer rewrites without a
// happens-before edge): it takes the Net's receive lock if free and looks; a
// ring being drained by another goroutine counts as waiting.
func (c *shmConn) rxWaiting() bool {
	if !c.n.rxMu.TryLock() {
		return true
	}
	w := c.rx != nil && !c.rx.Empty()
	c.n.rxMu.Unlock()
	return w
}
