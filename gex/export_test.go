package gex

import "github.com/gexgo/gexgo/internal/conduit"

// Hooks for the external test package (gex_test). They let the receive-side
// tests see what a rank dropped and inject AMs that the API would refuse.

// RejectedAMs is the number of incoming AMs c has rejected (unregistered
// handler, wrong category, request/reply or nargs, Long outside the segment).
func RejectedAMs(c *Client) uint64 { return c.rejected.Load() }

// RawHeader is the conduit header RawSend takes.
type RawHeader = conduit.Header

// Categories for RawHeader.Cat.
const (
	RawShort  = conduit.Short
	RawMedium = conduit.Medium
	RawLong   = conduit.Long
)

// RawSend hands an AM to the conduit without any of the initiator's checks,
// as a misbehaving peer would.
func RawSend(c *Client, dst int, h RawHeader, payload []byte) error {
	return c.cd.Send(dst, h, payload, 0)
}

// RawRMA runs a put (or get) of local to (rank, raddr) on the AM path without
// the initiator's bounds check, as if the initiator's segment table were
// wrong, so tests can see the target refuse it.
func RawRMA(tm *TM, put bool, rank Rank, raddr uint64, local []byte) error {
	_, err := tm.c.rmaAM(&rmaSpec{op: "RawRMA", put: put, mode: modeBlocking, rank: rank, local: local}, tm.jobrank(rank), raddr)
	return err
}

// VISEncodeRuns encodes (address, length) runs as a VIS run list.
func VISEncodeRuns(b []byte, runs [][2]uint64) []byte {
	var prev uint64
	for _, r := range runs {
		var tmp [runEntryMax]byte
		n := putRun(tmp[:], 0, &prev, r[0], int(r[1]))
		b = append(b, tmp[:n]...)
	}
	return b
}

// VISDecodeRuns runs the target's decoder of a VIS run list against a
// segment of size bytes at base, writing 0xff over every run it accepts in
// seg (which a run outside it would make panic).
func VISDecodeRuns(list []byte, base, size uint64, total int, seg []byte) error {
	return visDecodeRuns(list, base, size, total, func(off uint64, n int) {
		for i := range seg[off : off+uint64(n)] {
			seg[off+uint64(i)] = 0xff
		}
	})
}

// SetSlowPathHook makes c call f with the name of every RMA and atomic call
// that takes the general path instead of the mapped fast path (nil: none).
// Set it before the calls it is to see.
func SetSlowPathHook(c *Client, f func(op string)) { c.slowHook = f }
