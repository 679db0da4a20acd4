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

// withOwnSegHint appends ownSegHint for address a to a bad-argument error
// (VIS reports its bounds errors from several places; the first remote
// address stands for them).
func (c *Client) withOwnSegHint(err error, jobrank int, a uint64) error {
	e, ok := err.(*Error)
	if !ok || a == 0 {
		return err
	}
	h := c.ownSegHint(jobrank, a)
	if h == "" {
		return err
	}
	e2 := *e
	e2.Msg += h
	return &e2
}

// remoteBase is the first remote address of a VIS call (0 if none), as the
// caller gave it (FlagPeerSegOffset offsets are not addresses: 0).
func (v *visCall) remoteBase() uint64 {
	r := &v.remote
	if r.adj != 0 {
		return 0
	}
	switch {
	case v.strided:
		return uint64(v.raddr)
	case len(r.vecs) > 0:
		return uint64(r.vecs[0].Addr)
	case len(r.addrs) > 0:
		return uint64(r.addrs[0])
	}
	return 0
}
