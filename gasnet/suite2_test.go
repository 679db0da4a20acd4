package gasnet_test

import (
	"bytes"

	"github.com/gexgo/gexgo/gasnet"
	"github.com/gexgo/gexgo/gex"
)

// barrierCase is one row of the named-barrier matching matrix: what each
// node passes to notify and to wait, as a function of the node, and which
// nodes' waits must report GASNET_ERR_BARRIER_MISMATCH.
type barrierCase struct {
	name     string
	notify   func(me gasnet.Node) (int32, int)
	wait     func(me gasnet.Node) (int32, int)
	mismatch func(me, n gasnet.Node) bool
	try      bool // complete with BarrierTry instead of BarrierWait
}

func same(id int32, fl int) func(gasnet.Node) (int32, int) {
	return func(gasnet.Node) (int32, int) { return id, fl }
}

const anon, mism = gasnet.BarrierFlagAnonymous, gasnet.BarrierFlagMismatch

var barrierMatrix_ = []barrierCase{
	{"all anonymous", same(0, anon), same(0, anon), never, false},
	{"anonymous ids ignored", func(me gasnet.Node) (int32, int) { return int32(me) * 5, anon }, same(99, anon), never, false},
	{"all named, same id", same(42, 0), same(42, 0), never, true},
	{"named and anonymous mixed", func(me gasnet.Node) (int32, int) {
		if me%2 == 0 {
			return 7, 0
		}
		return 0, anon
	}, func(me gasnet.Node) (int32, int) {
		if me%2 == 0 {
			return 7, 0
		}
		return 0, anon
	}, never, false},
	{"named, ids differ", func(me gasnet.Node) (int32, int) { return int32(me), 0 }, func(me gasnet.Node) (int32, int) { return int32(me), 0 },
		func(_, n gasnet.Node) bool { return n > 1 }, true},
	{"one named id, one other named id, rest anonymous", func(me gasnet.Node) (int32, int) {
		switch me {
		case 0:
			return 1, 0
		case 1:
			return 2, 0
		}
		return 0, anon
	}, func(me gasnet.Node) (int32, int) {
		switch me {
		case 0:
			return 1, 0
		case 1:
			return 2, 0
		}
		return 0, anon
	}, func(_, n gasnet.Node) bool { return n > 1 }, false},
	{"one node passes MISMATCH", func(me gasnet.Node) (int32, int) {
		if me == 0 {
			return 0, mism
		}
		return 0, anon
	}, func(me gasnet.Node) (int32, int) {
		if me == 0 {
			return 0, mism
		}
		return 0, anon
	}, always, false},
	{"wait flags differ from notify here", same(3, 0), func(me gasnet.Node) (int32, int) {
		if me == 0 {
			return 3, anon
		}
		return 3, 0
	}, func(me, _ gasnet.Node) bool { return me == 0 }, false},
	{"wait id differs from notify here", same(3, 0), func(me gasnet.Node) (int32, int) {
		if me == 0 {
			return 4, 0
		}
		return 3, 0
	}, func(me, _ gasnet.Node) bool { return me == 0 }, true},
	{"after mismatches, a matching barrier", same(11, 0), same(11, 0), never, false},
}

func never(_, _ gasnet.Node) bool  { return false }
func always(_, _ gasnet.Node) bool { return true }

// barrierMatrix runs the matching matrix, then the protocol violations and
// the EX-collective rule.
func barrierMatrix(e *env, a *amTest) {
	for _, c := range barrierMatrix_ {
		id, fl := c.notify(e.me)
		e.Check(e.j.BarrierNotify(id, fl), c.name+": BarrierNotify")
		wid, wfl := c.wait(e.me)
		var err error
		if c.try {
			for {
				err = e.j.BarrierTry(wid, wfl)
				if err != gasnet.ErrNotReady {
					break
				}
			}
		} else {
			err = e.j.BarrierWait(wid, wfl)
		}
		if c.mismatch(e.me, e.n) {
			e.Want(err, gasnet.ErrBarrierMismatch, c.name)
			if gasnet.ErrorCode(err) != gasnet.ErrCodeBarrierMismatch {
				e.Fatalf("%s: ErrorCode %d", c.name, gasnet.ErrorCode(err))
			}
		} else {
			e.Check(err, c.name)
		}
	}
	// Protocol violations.
	e.Want(e.j.BarrierWait(0, anon), gasnet.ErrBadArg, "wait without notify", "no gasnet_barrier_notify")
	e.Want(e.j.BarrierTry(0, anon), gasnet.ErrBadArg, "try without notify", "no gasnet_barrier_notify")
	e.Want(e.j.BarrierNotify(0, 4), gasnet.ErrBadArg, "notify with bad flags", "flags")
	e.Check(e.j.BarrierNotify(0, anon), "notify")
	e.Want(e.j.BarrierNotify(0, anon), gasnet.ErrBadArg, "second notify", "twice")
	// GASNet-EX: no EX collective over the primordial team while a GASNet-1
	// barrier is in progress. Node 0 tries one before node 1 has notified
	// (node 1 waits for node 0's ping), so the barrier cannot be complete.
	if e.n > 1 {
		switch e.me {
		case 0:
			_, err := e.tm.BarrierNB(0)
			e.Want(err, gex.ErrBadArg, "EX BarrierNB during a GASNet-1 barrier", "GASNet-1 barrier")
			e.Check(e.j.AMRequestShort(1, a.idx[5]), "ping node 1")
		case 1:
			e.Check(e.j.BlockUntil(func() bool { return a.barrierPing.Load() > 0 }), "wait for node 0's ping")
		}
	}
	e.Check(e.j.BarrierWait(0, anon), "wait")
	// Now EX collectives work again, and an incomplete one blocks a notify.
	ev, err := e.tm.BarrierNB(0)
	e.Check(err, "EX BarrierNB after the GASNet-1 barrier")
	e.Check(ev.Wait(), "EX barrier")
}

// visModel: every node writes its zone on every node with each VIS form and
// reads it back with each VIS get form.
func visModel(e *env) {
	for p := range e.n {
		zone := visBase + int(e.me)*visZone
		at := func(off int) gasnet.Addr { return e.at(p, zone+off) }
		model := bytes.Repeat([]byte{fillByte}, visZone)
		src := make([]byte, 4096)
		for i := range src {
			src[i] = byte(int(e.me)*17 + int(p)*5 + i*11 + i>>7)
		}
		// Vector (design A): 4 regions from 3 slices of another split.
		dvec := []gasnet.Memvec{{Addr: at(0), Len: 10}, {Addr: at(20), Len: 0}, {Addr: at(40), Len: 100}, {Addr: at(400), Len: 90}}
		svec := [][]byte{src[0:50], src[50:60], src[60:200]}
		vmodel := func(base int) {
			flat := append(append(append([]byte{}, svec[0]...), svec[1]...), svec[2]...)
			k := 0
			for _, d := range dvec {
				off := int(d.Addr-at(0)) + base
				copy(model[off:off+int(d.Len)], flat[k:k+int(d.Len)])
				k += int(d.Len)
			}
		}
		shift := func(v []gasnet.Memvec, by int) []gasnet.Memvec {
			out := make([]gasnet.Memvec, len(v))
			for i, m := range v {
				out[i] = gasnet.Memvec{Addr: m.Addr + gasnet.Addr(by), Len: m.Len}
			}
			return out
		}
		e.Check(e.j.PutvBulk(p, dvec, svec), "PutvBulk")
		vmodel(0)
		h, err := e.j.PutvNBBulk(p, shift(dvec, 1000), svec)
		e.Check(err, "PutvNBBulk")
		vmodel(1000)
		e.Check(e.j.PutvNBIBulk(p, shift(dvec, 2000), svec), "PutvNBIBulk")
		vmodel(2000)
		// Indexed (design B): 8 regions of 16 bytes from 4 of 32.
		idst := make([]gasnet.Addr, 8)
		for i := range idst {
			idst[i] = at(3000 + i*40)
		}
		isrc := [][]byte{src[300:332], src[400:432], src[500:532], src[600:640]}
		imodel := func(base int) {
			flat := []byte{}
			for _, s := range isrc {
				flat = append(flat, s[:32]...)
			}
			for i := range idst {
				off := int(idst[i]-at(0)) + base
				copy(model[off:off+16], flat[i*16:i*16+16])
			}
		}
		shiftA := func(v []gasnet.Addr, by int) []gasnet.Addr {
			out := make([]gasnet.Addr, len(v))
			for i := range v {
				out[i] = v[i] + gasnet.Addr(by)
			}
			return out
		}
		e.Check(e.j.PutiBulk(p, idst, 16, isrc, 32), "PutiBulk")
		imodel(0)
		h2, err := e.j.PutiNBBulk(p, shiftA(idst, 400), 16, isrc, 32)
		e.Check(err, "PutiNBBulk")
		imodel(400)
		e.Check(e.j.PutiNBIBulk(p, shiftA(idst, 800), 16, isrc, 32), "PutiNBIBulk")
		imodel(800)
		// Strided (design B): count {8 bytes, 4, 3}, destination strides
		// {16, 80}, contiguous source.
		count := []int{8, 4, 3}
		dstr, sstr := []int{16, 80}, []int{8, 32}
		smodel := func(base int) {
			for k := 0; k < 3; k++ {
				for jj := 0; jj < 4; jj++ {
					copy(model[base+k*80+jj*16:][:8], src[1000+k*32+jj*8:][:8])
				}
			}
		}
		e.Check(e.j.PutsBulk(p, at(5000), dstr, src[1000:], sstr, count, 2), "PutsBulk")
		smodel(5000)
		h3, err := e.j.PutsNBBulk(p, at(5400), dstr, src[1000:], sstr, count, 2)
		e.Check(err, "PutsNBBulk")
		smodel(5400)
		e.Check(e.j.PutsNBIBulk(p, at(5800), dstr, src[1000:], sstr, count, 2), "PutsNBIBulk")
		smodel(5800)
		// stridelevels 0: a contiguous copy of count[0] bytes, strides ignored.
		e.Check(e.j.PutsBulk(p, at(6200), nil, src[2000:], nil, []int{77}, 0), "PutsBulk(stridelevels 0)")
		copy(model[6200:6277], src[2000:2077])
		// Degenerate: a zero count is a no-op, every other argument ignored.
		e.Check(e.j.PutsBulk(e.n+5, 0, nil, nil, nil, []int{8, 0, 3}, 2), "PutsBulk(count 0)")
		e.Check(e.j.PutvBulk(p, nil, nil), "PutvBulk(empty)")
		e.Check(e.j.WaitSyncnbAll([]gasnet.Handle{h, h2, h3}), "WaitSyncnbAll(VIS)")
		e.Check(e.j.WaitSyncnbiPuts(), "WaitSyncnbiPuts(VIS)")

		got := make([]byte, visZone)
		e.Check(e.j.GetBulk(got, p, at(0)), "GetBulk(VIS zone)")
		if !bytes.Equal(got, model) {
			i := firstDiff(got, model)
			e.Fatalf("VIS zone on node %d: byte %d = %#x, want %#x", p, i, got[i], model[i])
		}
		// Gets: the same shapes read back into fresh local buffers.
		g1 := [][]byte{make([]byte, 50), make([]byte, 10), make([]byte, 140)}
		e.Check(e.j.GetvBulk(g1, p, dvec), "GetvBulk")
		g2 := [][]byte{make([]byte, 200)}
		hg, err := e.j.GetvNBBulk(g2, p, shift(dvec, 1000))
		e.Check(err, "GetvNBBulk")
		g3 := [][]byte{make([]byte, 100), make([]byte, 100)}
		e.Check(e.j.GetvNBIBulk(g3, p, shift(dvec, 2000)), "GetvNBIBulk")
		gi := [][]byte{make([]byte, 64), make([]byte, 64)}
		e.Check(e.j.GetiBulk(gi, 64, p, idst, 16), "GetiBulk")
		gi2 := [][]byte{make([]byte, 128)}
		hgi, err := e.j.GetiNBBulk(gi2, 128, p, shiftA(idst, 400), 16)
		e.Check(err, "GetiNBBulk")
		gi3 := [][]byte{make([]byte, 128)}
		e.Check(e.j.GetiNBIBulk(gi3, 128, p, shiftA(idst, 800), 16), "GetiNBIBulk")
		gs := make([]byte, 96)
		e.Check(e.j.GetsBulk(gs, sstr, p, at(5000), dstr, count, 2), "GetsBulk")
		gs2 := make([]byte, 96)
		hgs, err := e.j.GetsNBBulk(gs2, sstr, p, at(5400), dstr, count, 2)
		e.Check(err, "GetsNBBulk")
		gs3 := make([]byte, 96)
		e.Check(e.j.GetsNBIBulk(gs3, sstr, p, at(5800), dstr, count, 2), "GetsNBIBulk")
		e.Check(e.j.WaitSyncnbAll([]gasnet.Handle{hg, hgi, hgs}), "WaitSyncnbAll(VIS gets)")
		e.Check(e.j.WaitSyncnbiGets(), "WaitSyncnbiGets(VIS)")
		wantV := src[0:200]
		for _, g := range [][][]byte{g1, g2, g3} {
			if got := bytes.Join(g, nil); !bytes.Equal(got, wantV) {
				e.Fatalf("vector get from node %d: %x, want %x", p, got, wantV)
			}
		}
		wantI := bytes.Join([][]byte{src[300:332], src[400:432], src[500:532], src[600:632]}, nil)
		for _, g := range [][][]byte{gi, gi2, gi3} {
			if got := bytes.Join(g, nil); !bytes.Equal(got, wantI) {
				e.Fatalf("indexed get from node %d: %x, want %x", p, got, wantI)
			}
		}
		for _, g := range [][]byte{gs, gs2, gs3} {
			if !bytes.Equal(g, src[1000:1096]) {
				e.Fatalf("strided get from node %d: %x", p, g)
			}
		}
	}
	// Design B argument rules.
	src := make([]byte, 64)
	e.Want(e.j.PutsBulk(0, e.at(0, visBase), []int{4}, src, []int{8}, []int{8, 2}, 1), gasnet.ErrBadArg, "overlapping strides", "dststrides[0] = 4", "count[0] = 8")
	e.Want(e.j.PutsBulk(0, e.at(0, visBase), []int{8, 8}, src, []int{8, 16}, []int{8, 2, 2}, 2), gasnet.ErrBadArg, "non-increasing strides", "dststrides[1]")
	e.Want(e.j.PutsBulk(0, e.at(0, visBase), []int{8}, src, []int{8}, []int{8}, 1), gasnet.ErrBadArg, "count too short", "count has 1 entries")
	e.Want(e.j.PutsBulk(0, e.at(0, visBase), nil, src, []int{8}, []int{8, 2}, 1), gasnet.ErrBadArg, "strides too short", "dststrides has 0 entries")
	e.Want(e.j.PutvBulk(0, []gasnet.Memvec{{Addr: e.at(0, segSize-4), Len: 8}}, [][]byte{src[:8]}), gasnet.ErrBadArg, "vector outside the segment")
}

// mixing: the EX objects under the job, EX atomics and collectives beside
// GASNet-1 calls, an EX AM to a GASNet-1 handler, handles and events.
func mixing(e *env, a *amTest) {
	c, ep, tm, seg := e.j.QueryGexObjects()
	if c != e.c || ep == nil || tm != e.tm || seg == nil || &seg.Bytes()[0] != &e.j.Segment()[0] {
		e.Fatalf("QueryGexObjects")
	}
	ad, err := gex.ADCreate[uint64](tm, gex.DTU64, gex.OPFAdd|gex.OPGet, 0)
	e.Check(err, "ADCreate")
	e.Check(e.j.Memset(0, e.at(0, mixBase), 0, 8), "Memset(counter)")
	e.Barrier()
	var old uint64
	for i := 0; i < 50; i++ {
		ev, err := ad.OpNB(&old, 0, e.at(0, mixBase), gex.OPFAdd, 1, 0, 0)
		e.Check(err, "OpNB")
		e.Check(e.j.WaitSyncnb(ev), "WaitSyncnb(EX atomic event)")
	}
	e.Barrier()
	v, err := e.j.GetVal(0, e.at(0, mixBase), 8)
	e.Check(err, "GetVal(counter)")
	if v != 50*uint64(e.n) {
		e.Fatalf("counter = %d, want %d", v, 50*e.n)
	}
	e.Check(ad.Destroy(), "AD.Destroy")
	// A GASNet-1 handle synchronised by gex, and an EX collective.
	h, err := e.j.PutNB(e.me, e.at(e.me, mixBase+8), []byte{1, 2, 3})
	e.Check(err, "PutNB")
	e.Check(h.Wait(), "gex Event.Wait on a GASNet-1 handle")
	dst := make([]byte, 8)
	ev, err := tm.ReduceToAllNB(dst, []byte{byte(e.me + 1), 0, 0, 0, 0, 0, 0, 0}, gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
	e.Check(err, "ReduceToAllNB")
	e.Check(e.j.WaitSyncnb(ev), "WaitSyncnb(EX collective)")
	if want := byte(e.n * (e.n + 1) / 2); dst[0] != want {
		e.Fatalf("EX reduction = %d, want %d", dst[0], want)
	}
	// An EX request to a GASNet-1 handler, with 3 arguments.
	before := a.pings.Load()
	e.Barrier() // every node has read its count before any ping is sent
	e.Check(tm.RequestShort(gex.Rank((e.me+1)%e.n), a.idx[3], 0, 1, 2, 3), "EX RequestShort to a GASNet-1 handler")
	e.Check(e.j.BlockUntil(func() bool { return a.pings.Load() > before }), "BlockUntil(EX ping)")
	e.Barrier()
}

// badInput: errors name the argument and the bound.
func badInput(e *env) {
	e.Want(e.j.Put(e.n, e.at(0, 0), []byte{1}), gasnet.ErrBadArg, "Put to a bad node", "out of range")
	e.Want(e.j.Put(0, e.at(0, segSize-2), []byte{1, 2, 3}), gasnet.ErrBadArg, "Put past the segment", "outside")
	e.Want(e.j.Get(make([]byte, 4), 0, e.at(0, -4)), gasnet.ErrBadArg, "Get below the segment", "outside")
	_, err := e.j.GetNB(make([]byte, 4), 0, e.at(0, segSize))
	e.Want(err, gasnet.ErrBadArg, "GetNB past the segment", "outside")
	e.Want(e.j.PutVal(0, e.at(0, 0), 1, 9), gasnet.ErrBadArg, "PutVal of 9 bytes", "nbytes 9")
	_, err = e.j.GetNBVal(0, e.at(0, 0), 0)
	e.Want(err, gasnet.ErrBadArg, "GetNBVal of 0 bytes", "nbytes 0")
	_, err = e.j.WaitSyncnbValget(gasnet.ValgetHandle{})
	e.Want(err, gasnet.ErrBadArg, "WaitSyncnbValget of a zero handle")
	e.Want(e.j.Attach(nil, segSize, 0), gasnet.ErrResource, "second Attach", "once")
	seg := e.j.Segment()
	e.Want(e.j.Put(e.me, e.at(e.me, 100), seg[98:108]), gasnet.ErrBadArg, "Put overlapping its source", "overlap")
}
