//go:build !race

package ptlnet

// rxWaiting reports whether the peer's ring may hold a message (hasWork, the
// progress goroutine's check before it sleeps, which also retires rings, so
// c.rx is not unmapped under it). A lock-free look at the published head's
// tag (shm.MsgRing.Waiting): it misses no message committed before it, and
// may report one a Poll is handling.
func (c *shmConn) rxWaiting() bool { return c.rx != nil && c.rx.Waiting() }
