package gex

import "fmt"

// ownSegHint explains the most common wrong remote address: one computed from
// the caller's own segment (seg.QueryAddr()+off) and handed to a call that
// targets a peer. GASNet-EX names a location in a peer's segment by the
// peer's own virtual address ("Extended API", gex_RMA_PutBlocking: "dest ...
// an address in the segment of rank"), which differs from ours in general.
//
// It is called only on the error path, after the address was found outside
// the peer's segment, so it costs the accepted calls nothing. It speaks only
// when the address lies in the caller's own segment: segments of different
// processes may occupy the same virtual range, and an address inside the
// peer's segment is legitimate whatever else it also lies in (that case never
// reaches here).
func (c *Client) ownSegHint(jobrank int, a uint64) string {
	if jobrank == c.rank {
		return ""
	}
	seg := c.ep.seg.Load()
	if seg == nil {
		return ""
	}
	base := uint64(seg.addr)
	if a < base || a-base >= uint64(len(seg.mem)) {
		return ""
	}
	return fmt.Sprintf("; it lies in this rank's own segment (offset %d): a peer's segment has its own address, "+
		"use tm.RemoteAddr(rank, %d), or pass the offset with FlagPeerSegOffset", a-base, a-base)
}
