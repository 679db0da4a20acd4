//go:build !race

package smp

// ringWaiting reports whether inbound ring qi may hold an AM: a look at the
// ring without its consumer lock (shm.MsgRing.Waiting), one load of the
// head and one of a slot word, cheap enough for every poll.
func (c *Conduit) ringWaiting(qi int) bool { return c.inbound[qi].Waiting() }
