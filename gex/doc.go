// Package gex is GASNet-EX for Go: one-sided puts and gets, Active Messages,
// remote atomics, non-contiguous (VIS) transfers, teams and collectives for
// SPMD programs. A rank is an OS process started by gexrun; ranks on one host
// map each other's segments, so a put there is a copy; other hosts are
// reached over TCP (GEX_CONDUIT=tcp).
//
// # A tour
//
// Every rank runs the same program. Start it with the launcher
// (go install github.com/gexgo/gexgo/cmd/gexrun@latest):
//
//	gexrun -n 4 ./yourprog
//
// Initialise, attach a segment (the memory peers may access), and use it as
// typed memory:
//
//	c, ep, tm, err := gex.ClientInit("MYPROG", 0) // a name of [A-Z][A-Z0-9_]+
//	seg, err := gex.SegmentAttach(tm, 1<<20) // collective; ends with a barrier
//	me, n := tm.QueryRank(), tm.QuerySize()
//	mine := gex.View[float64](seg)          // my segment as []float64
//
// Put and get: element index i of a peer's segment, or a byte address from
// tm.RemoteAddr (a peer's segment has its own address; never compute one from
// your own segment):
//
//	right := (me + 1) % n
//	err = gex.PutSlice(tm, right, 0, []float64{1, 2, 3}, 0) // returns at remote completion
//	got := make([]float64, 3)
//	err = gex.GetSlice(tm, got, right, 0, 0)
//	addr, err := tm.RemoteAddr(right, 64) // byte 64 of right's segment
//	err = tm.PutBlocking(right, addr, []byte("hello"), 0)
//
// Active Messages: register handlers (indices from AMIndexBase = 128), then
// a barrier, so that no request arrives before its handler is there. A
// request handler may send one reply:
//
//	var answered atomic.Bool
//	err = ep.RegisterHandlers([]gex.AMEntry{
//		{Index: 128, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1,
//			Fn: func(t *gex.Token, _ []byte, a []gex.AMArg) { t.ReplyShort(129, 0, a[0]*2) }},
//		{Index: 129, Flags: gex.FlagAMShort | gex.FlagAMReply, NArgs: 1,
//			Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { answered.Store(true) }},
//	})
//	err = tm.Barrier()
//	err = tm.RequestShort(right, 128, 0, 21)
//	err = c.BlockUntil(answered.Load) // polls: handlers run in calls that poll
//
// Remote atomics, on an atomic domain created collectively:
//
//	ad, err := gex.ADCreate[uint64](tm, gex.DTU64, gex.OPFAdd, 0)
//	var old uint64
//	ev, err := ad.OpNB(&old, 0, rank0Counter, gex.OPFAdd, 1, 0, 0)
//	err = ev.Wait()
//
// Collectives: barrier, broadcast and reductions over []T (the data type
// comes from T):
//
//	err = tm.Barrier()
//	sum := []float64{localSum}
//	err = gex.ReduceToAll(tm, sum, sum, gex.OPAdd)
//	err = gex.Broadcast(tm, 0, params, params)
//
// End with a barrier (nobody leaves while a peer may need it) and Close.
//
// # The spec's names
//
// The typed helpers (View, PeerView, PutSlice, GetSlice, ReduceToAll,
// ReduceToOne, Broadcast, TM.Barrier, TM.RemoteAddr) are thin: each calls
// one function named after the GASNet-EX specification (GASNet-EX API v0.18,
// GASNet-EX Specification Collection 2024.5.0) without the gex_ prefix:
// gex_RMA_PutBlocking is TM.PutBlocking, gex_AM_RequestShort is
// TM.RequestShort, gex_AD_OpNB is AD.OpNB, gex_Coll_ReduceToAllNB is
// TM.ReduceToAllNB. Remote locations are gex.Addr, the owner's address as the
// spec says; local buffers are []byte. Errors wrap the spec's codes
// (ErrBadArg, ErrResource, ...) and say which argument broke which bound.
//
// # Further reading
//
//   - [docs/tutorial.md]: GASNet-EX in ten minutes for MPI and OpenSHMEM programmers
//   - [docs/core.md], [docs/rma.md], [docs/am.md], [docs/atomics.md], [docs/vis.md],
//     [docs/coll.md]: every spec function's Go name, and every deviation
//   - [docs/mk.md]: Memory Kinds (EPCreate, SegmentCreate, BindSegment,
//     PublishBoundSegment, Create over any endpoints, TMPair, MKHost)
//   - [docs/tcp.md], [docs/spawners.md]: more than one host
//   - [examples]: stencil (halo exchange by strided puts), dht (AMs with replies),
//     histogram (remote atomics), amping (AM latency and rate)
//
// [docs/tutorial.md]: https://github.com/gexgo/gexgo/blob/main/docs/tutorial.md
// [docs/core.md]: https://github.com/gexgo/gexgo/blob/main/docs/core.md
// [docs/rma.md]: https://github.com/gexgo/gexgo/blob/main/docs/rma.md
// [docs/am.md]: https://github.com/gexgo/gexgo/blob/main/docs/am.md
// [docs/atomics.md]: https://github.com/gexgo/gexgo/blob/main/docs/atomics.md
// [docs/vis.md]: https://github.com/gexgo/gexgo/blob/main/docs/vis.md
// [docs/coll.md]: https://github.com/gexgo/gexgo/blob/main/docs/coll.md
// [docs/mk.md]: https://github.com/gexgo/gexgo/blob/main/docs/mk.md
// [docs/tcp.md]: https://github.com/gexgo/gexgo/blob/main/docs/tcp.md
// [docs/spawners.md]: https://github.com/gexgo/gexgo/blob/main/docs/spawners.md
// [examples]: https://github.com/gexgo/gexgo/tree/main/examples
package gex
