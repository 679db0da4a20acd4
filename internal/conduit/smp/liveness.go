package smp

import "github.com/gexgo/gexgo/internal/boot"

// Bootstrap returns the bootstrap the conduit was built on (for the progress
// reports of package gex).
func (c *Conduit) Bootstrap() boot.Bootstrap { return c.b }

// OnPeerLeft registers fn to run when a rank leaves the job early (its
// process ended without Close, Exit or Abort while this rank was still in
// it): reported by the launcher (boot.PeerWatch) or, under PMI, found by
// this conduit (watchPeers).
func (c *Conduit) OnPeerLeft(fn func(rank int, msg string)) {
	if w, ok := c.b.(boot.PeerWatch); ok {
		w.OnPeerLeft(fn)
	}
}
