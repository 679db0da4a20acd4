//go:build !race

package shm

// Waiting reports whether a message may be waiting: the tag at the
// published head is committed, or the mailbox holds a message. Any goroutine may call it, without the
// consumer's lock. While no consumer is between Peek and Publish it misses
// no message committed before the call (what Bell.Sleep's check needs); it
// may report one a consumer is handling, or a pad.
//
// It is a hint about memory it does not synchronise with: the slot it reads
// may meanwhile be rewritten by a producer a lap later, with plain stores
// (payload bytes) that no happens-before edge orders after the read. The
// value read is only compared, never trusted, so that is harmless, but the
// race detector reports it: race-enabled builds do not have Waiting, and
// callers ask the consumer instead (take its lock, then Empty).
func (q *MsgRing) Waiting() bool {
	h := q.head.Load()
	return uint32(q.wordAt(h).Load()) == uint32(h)|mrTagBit || q.mail.Load()&mrTagBit != 0
}
