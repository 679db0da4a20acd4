package gasnet_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gexgo/gexgo/gasnet"
	"github.com/gexgo/gexgo/gex"
)

// Segment layout of the conformance suite (per node).
const (
	segSize   = 2 << 20
	longSlot  = 1536          // one AM Long payload: each Long in flight has its own slot
	longArea  = 12 * longSlot // a sender's slots: requests at src*longArea, replies at repBase+replier*longArea
	repBase   = 4 * longArea  //
	rmaBase   = 160 << 10     // writer w's RMA zone at rmaBase + w*rmaZone
	rmaZone   = 256 << 10     //
	visBase   = 1700 << 10
	visZone   = 16 << 10
	mixBase   = 1800 << 10 // EX atomics counter
	fillByte  = 0xEE       // every byte of every segment before the suite writes
	maxNodes  = 4
	hReqIndex = 200 // fixed index of the AM request handler
)

// TestConformance runs the whole GASNet-1 suite on 1 and 3 nodes on loop,
// and on 3 nodes on loop and smp, each also with GASNET_SUPERNODE_MAXSIZE=1.
func TestConformance(t *testing.T) {
	run(t, 1, modeLoop, suite)
	for _, m := range []mode{modeLoop, modeLoopAM, modeSMP, modeSMPAM} {
		run(t, 3, m, suite)
	}
}

// TestConformanceTCP runs the suite on 4 nodes over two pretend hosts joined
// by the tcp conduit.
func TestConformanceTCP(t *testing.T) { run(t, 4, modeTCP, suite) }

// TestNetns runs the suite on 4 nodes on two hosts made of network
// namespaces (tcp between them, shared memory inside each).
func TestNetns(t *testing.T) {
	if testingLoopOnly() {
		t.Skip("GEX_TEST_CONDUIT=loop: the tcp conduit runs between processes")
	}
	m := mode{name: "netns", launch: inNetns(t, 2)}
	run(t, 4, m, suite)
}

// suite is the conformance suite; every part starts after a barrier.
func suite(e *env) {
	preAttach(e)
	am := newAMTest(e)
	e.attach(am.table(), segSize)
	for _, en := range am.entries {
		am.idx = append(am.idx, en.Index)
	}
	mine := e.j.Segment()
	for i := range mine {
		mine[i] = fillByte
	}
	e.Barrier()
	core(e, am)
	e.Barrier()
	am.run()
	e.Barrier()
	restrictions(e, am)
	e.Barrier()
	rmaModel(e)
	e.Barrier()
	memsetBounds(e)
	e.Barrier()
	barrierMatrix(e, am)
	e.Barrier()
	visModel(e)
	e.Barrier()
	mixing(e, am)
	e.Barrier()
	badInput(e)
	e.Barrier()
}

// preAttach: between Init and Attach only the job queries work.
func preAttach(e *env) {
	if e.j.Mynode() >= e.j.Nodes() {
		e.Fatalf("Mynode %d >= Nodes %d", e.j.Mynode(), e.j.Nodes())
	}
	if e.j.GetMaxLocalSegmentSize()%gasnet.PageSize != 0 || e.j.GetMaxGlobalSegmentSize() > e.j.GetMaxLocalSegmentSize() {
		e.Fatalf("max segment sizes: local %d, global %d", e.j.GetMaxLocalSegmentSize(), e.j.GetMaxGlobalSegmentSize())
	}
	if v, ok := e.j.Getenv(testEnvVar); !ok || v != testEnvVal {
		e.Fatalf("Getenv(%s) = %q, %v; want %q", testEnvVar, v, ok, testEnvVal)
	}
	if _, ok := e.j.Getenv("GASNET1_TEST_UNSET_VARIABLE"); ok {
		e.Fatalf("Getenv of an unset variable reports it set")
	}
	e.Want(e.j.Put(0, 0, []byte{1}), gasnet.ErrBadArg, "Put before Attach", "no bound segment")
	e.Want(e.j.AMRequestShort(0, hReqIndex), gasnet.ErrNotInit, "AMRequestShort before Attach")
	e.Want(e.j.AMPoll(), gasnet.ErrNotInit, "AMPoll before Attach")
	e.Want(e.j.BarrierNotify(0, 0), gasnet.ErrNotInit, "BarrierNotify before Attach")
	e.Want(e.j.GetSegmentInfo(make([]gasnet.SegInfo, 1)), gasnet.ErrNotInit, "GetSegmentInfo before Attach")
}

// core: segment info, error names, constants, wait modes, BlockUntil.
func core(e *env, am *amTest) {
	big := make([]gasnet.SegInfo, e.n+2)
	big[e.n+1] = gasnet.SegInfo{Addr: 7, Size: 7}
	e.Check(e.j.GetSegmentInfo(big), "GetSegmentInfo")
	if big[e.n+1] != (gasnet.SegInfo{Addr: 7, Size: 7}) {
		e.Fatalf("GetSegmentInfo wrote past Nodes()")
	}
	seg := e.j.Segment()
	if big[e.me].Size != segSize || len(seg) != segSize || uintptr(big[e.me].Addr) != addrOf(seg) {
		e.Fatalf("own segment info %+v, Segment() at %#x of %d", big[e.me], addrOf(seg), len(seg))
	}
	for r := range e.n {
		if big[r].Size != segSize || big[r].Addr%gasnet.PageSize != 0 {
			e.Fatalf("node %d segment %+v", r, big[r])
		}
	}
	// The path under test: with GASNET_SUPERNODE_MAXSIZE=1 no peer segment
	// is mapped (every transfer to a peer takes the AM path).
	for p := range e.n {
		bs, _, err := e.tm.QueryBoundSegmentNB(gex.Rank(p), 0)
		e.Check(err, "QueryBoundSegmentNB")
		if e.am && p != e.me && bs.Local != nil || p == e.me && bs.Local == nil {
			e.Fatalf("node %d's segment mapped here: %v (AM-path mode %v)", p, bs.Local != nil, e.am)
		}
	}
	small := make([]gasnet.SegInfo, 1)
	e.Check(e.j.GetSegmentInfo(small), "GetSegmentInfo(1 entry)")
	if small[0] != big[0] {
		e.Fatalf("GetSegmentInfo(1 entry) = %+v, want %+v", small[0], big[0])
	}
	// Handler indices: the fixed one stays, don't-care ones are assigned
	// from 255 downward in table order, identically on every node.
	if am.idx[0] != hReqIndex || am.idx[1] != 255 || am.idx[2] != 254 {
		e.Fatalf("handler indices %v, want [%d 255 254 ...]", am.idx, hReqIndex)
	}
	for code, name := range map[int]string{gasnet.OK: "GASNET_OK", gasnet.ErrCodeNotInit: "GASNET_ERR_NOT_INIT",
		gasnet.ErrCodeResource: "GASNET_ERR_RESOURCE", gasnet.ErrCodeBadArg: "GASNET_ERR_BAD_ARG",
		gasnet.ErrCodeNotReady: "GASNET_ERR_NOT_READY", gasnet.ErrCodeBarrierMismatch: "GASNET_ERR_BARRIER_MISMATCH"} {
		if gasnet.ErrorName(code) != name || gasnet.ErrorDesc(code) == "" {
			e.Fatalf("ErrorName(%d) = %q, ErrorDesc %q", code, gasnet.ErrorName(code), gasnet.ErrorDesc(code))
		}
	}
	if gasnet.ErrorCode(nil) != gasnet.OK || gasnet.ErrorCode(gasnet.ErrNotReady) != gasnet.ErrCodeNotReady {
		e.Fatalf("ErrorCode")
	}
	if gasnet.SpecVersionMajor != 1 || gasnet.SpecVersionMinor != 8 || gasnet.Segment != gasnet.SegmentFast || gasnet.AMMaxArgs() != 16 {
		e.Fatalf("constants")
	}
	if e.j.AMMaxMedium() < 512 || e.j.AMMaxLongRequest() < 512 || e.j.AMMaxLongReply() < 512 {
		e.Fatalf("AM maxima %d %d %d below the spec's 512", e.j.AMMaxMedium(), e.j.AMMaxLongRequest(), e.j.AMMaxLongReply())
	}
	e.Want(e.j.SetWaitmode(gasnet.WaitMode(42)), gasnet.ErrBadArg, "SetWaitmode(42)")
	for _, m := range []gasnet.WaitMode{gasnet.WaitSpin, gasnet.WaitBlock, gasnet.WaitSpinBlock} {
		e.Check(e.j.SetWaitmode(m), "SetWaitmode")
	}
	// GASNET_BLOCKUNTIL: a Short to self whose handler sets a flag.
	before := am.pings.Load()
	e.Check(e.j.AMRequestShort(e.me, am.idx[3]), "AMRequestShort(ping)")
	e.Check(e.j.BlockUntil(func() bool { return am.pings.Load() > before }), "BlockUntil")
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// rmaOp is one operation of the RMA model, at off within a writer's zone.
type rmaOp struct {
	kind string
	off  int
	n    int
	val  byte // memsets
}

var rmaOps = []rmaOp{
	{"put", 0, 1000, 0}, {"putbulk", 1000, 4000, 0},
	{"putval", 5000, 8, 0}, {"putval", 5008, 4, 0}, {"putval", 5012, 1, 0}, {"putval", 5013, 2, 0},
	{"putnb", 6000, 100000, 0}, {"putnbbulk", 106000, 3000, 0}, {"putnbval", 109000, 8, 0},
	{"putnbi", 110000, 70000, 0}, {"putnbibulk", 180000, 500, 0}, {"putnbival", 181000, 3, 0},
	{"memset", 182000, 3000, 1}, {"memsetnb", 185000, 40000, 0xAB}, {"memsetnbi", 225000, 5000, 0},
	{"region-putnbi", 231000, 2000, 0}, {"region-memsetnbi", 233000, 1000, 0x5A},
	{"put", 235000, 0, 0}, {"memset", 236000, 0, 9},
}

// pat is the byte writer w puts at position k of its zone on node p.
func pat(w, p gasnet.Node, k int) byte { return byte(int(w)*13 + int(p)*7 + k*3 + k>>8) }

// rmaModel: every node writes its zone on every node with every put form,
// syncs with every sync form, checks its own segment against the model, and
// reads every zone back with every get form.
func rmaModel(e *env) {
	type pending struct {
		h   gasnet.Handle
		why string
	}
	var hs []pending
	valOf := func(w, p gasnet.Node, op rmaOp) uint64 {
		var b [8]byte
		for i := 0; i < op.n; i++ {
			b[i] = pat(w, p, op.off+i)
		}
		return binary.LittleEndian.Uint64(b[:])
	}
	for p := range e.n {
		zone := rmaBase + int(e.me)*rmaZone
		src := make([]byte, rmaZone)
		for k := range src {
			src[k] = pat(e.me, p, k)
		}
		for _, op := range rmaOps {
			dst := e.at(p, zone+op.off)
			s := src[op.off : op.off+op.n]
			var err error
			var h gasnet.Handle
			switch op.kind {
			case "put":
				err = e.j.Put(p, dst, s)
			case "putbulk":
				err = e.j.PutBulk(p, dst, s)
			case "putval":
				err = e.j.PutVal(p, dst, valOf(e.me, p, op), op.n)
			case "putnb":
				h, err = e.j.PutNB(p, dst, s)
			case "putnbbulk":
				h, err = e.j.PutNBBulk(p, dst, s)
			case "putnbval":
				h, err = e.j.PutNBVal(p, dst, valOf(e.me, p, op), op.n)
			case "putnbi":
				err = e.j.PutNBI(p, dst, s)
			case "putnbibulk":
				err = e.j.PutNBIBulk(p, dst, s)
			case "putnbival":
				err = e.j.PutNBIVal(p, dst, valOf(e.me, p, op), op.n)
			case "memset":
				err = e.j.Memset(p, dst, int(op.val), uint64(op.n))
			case "memsetnb":
				h, err = e.j.MemsetNB(p, dst, int(op.val), uint64(op.n))
			case "memsetnbi":
				err = e.j.MemsetNBI(p, dst, int(op.val), uint64(op.n))
			case "region-putnbi":
				e.Check(e.j.BeginNBIAccessRegion(), "BeginNBIAccessRegion")
				err = e.j.PutNBI(p, dst, s)
				e.Want(e.j.WaitSyncnbiPuts(), gasnet.ErrBadArg, "implicit sync inside an access region", "access region")
			case "region-memsetnbi":
				err = e.j.MemsetNBI(p, dst, int(op.val), uint64(op.n))
				var rh gasnet.Handle
				rh, err2 := e.j.EndNBIAccessRegion()
				e.Check(err2, "EndNBIAccessRegion")
				for {
					if err := e.j.TrySyncnb(rh); err == nil {
						break
					} else if err != gasnet.ErrNotReady {
						e.Fatalf("TrySyncnb(region): %v", err)
					}
				}
			}
			e.Check(err, op.kind)
			hs = append(hs, pending{h, op.kind})
		}
	}
	// Sync the explicit handles with every form: All over the first half
	// (with invalid entries mixed in), Some until done over the rest.
	arr := make([]gasnet.Handle, 0, len(hs))
	for _, p := range hs {
		arr = append(arr, p.h, gasnet.InvalidHandle)
	}
	half := len(arr) / 2
	e.Check(e.j.WaitSyncnbAll(arr[:half]), "WaitSyncnbAll")
	for _, h := range arr[:half] {
		if h != gasnet.InvalidHandle {
			e.Fatalf("WaitSyncnbAll left a handle valid")
		}
	}
	rest := arr[half:]
	for {
		live := 0
		for _, h := range rest {
			if h != gasnet.InvalidHandle {
				live++
			}
		}
		if live == 0 {
			break
		}
		e.Check(e.j.WaitSyncnbSome(rest), "WaitSyncnbSome")
	}
	e.Check(e.j.TrySyncnbAll(rest), "TrySyncnbAll(all invalid)")
	e.Check(e.j.TrySyncnbSome(nil), "TrySyncnbSome(empty)")
	e.Check(e.j.WaitSyncnb(gasnet.InvalidHandle), "WaitSyncnb(invalid)")
	e.Check(e.j.TrySyncnb(gasnet.InvalidHandle), "TrySyncnb(invalid)")
	for {
		if err := e.j.TrySyncnbiPuts(); err == nil {
			break
		} else if err != gasnet.ErrNotReady {
			e.Fatalf("TrySyncnbiPuts: %v", err)
		}
	}
	e.Check(e.j.WaitSyncnbiAll(), "WaitSyncnbiAll")
	e.Barrier()

	// Each node checks what every writer left in its segment.
	model := func(w, p gasnet.Node) []byte {
		m := bytes.Repeat([]byte{fillByte}, rmaZone)
		for _, op := range rmaOps {
			for i := 0; i < op.n; i++ {
				if contains(op.kind, "memset") {
					m[op.off+i] = op.val
				} else {
					m[op.off+i] = pat(w, p, op.off+i)
				}
			}
		}
		return m
	}
	seg := e.j.Segment()
	for w := range e.n {
		got := seg[rmaBase+int(w)*rmaZone:][:rmaZone]
		if want := model(w, e.me); !bytes.Equal(got, want) {
			i := firstDiff(got, want)
			e.Fatalf("zone of writer %d: byte %d = %#x, want %#x", w, i, got[i], want[i])
		}
	}
	e.Barrier()

	// Every get form reads the zones back.
	for p := range e.n {
		w := (e.me + p) % e.n
		want := model(w, p)
		zone := rmaBase + int(w)*rmaZone
		got := make([]byte, rmaZone)
		src := func(off int) gasnet.Addr { return e.at(p, zone+off) }
		e.Check(e.j.Get(got[0:1000], p, src(0)), "Get")
		e.Check(e.j.GetBulk(got[1000:5000], p, src(1000)), "GetBulk")
		v, err := e.j.GetVal(p, src(5000), 8)
		e.Check(err, "GetVal")
		binary.LittleEndian.PutUint64(got[5000:], v)
		vh, err := e.j.GetNBVal(p, src(5008), 4)
		e.Check(err, "GetNBVal")
		h1, err := e.j.GetNB(got[6000:106000], p, src(6000))
		e.Check(err, "GetNB")
		h2, err := e.j.GetNBBulk(got[106000:110000], p, src(106000))
		e.Check(err, "GetNBBulk")
		e.Check(e.j.GetNBI(got[110000:180000], p, src(110000)), "GetNBI")
		e.Check(e.j.GetNBIBulk(got[180000:rmaZone], p, src(180000)), "GetNBIBulk")
		v4, err := e.j.WaitSyncnbValget(vh)
		e.Check(err, "WaitSyncnbValget")
		binary.LittleEndian.PutUint32(got[5008:], uint32(v4))
		if v4>>32 != 0 {
			e.Fatalf("4-byte value get %#x has high bits set", v4)
		}
		v1, err := e.j.GetVal(p, src(5012), 3)
		e.Check(err, "GetVal(3)")
		got[5012], got[5013], got[5014] = byte(v1), byte(v1>>8), byte(v1>>16)
		dead := h1
		e.Check(e.j.WaitSyncnb(h1), "WaitSyncnb")
		for {
			if err := e.j.TrySyncnb(h2); err == nil {
				break
			} else if err != gasnet.ErrNotReady {
				e.Fatalf("TrySyncnb: %v", err)
			}
		}
		if dead != gasnet.InvalidHandle { // AM path: a real event, now consumed
			e.Want(e.j.WaitSyncnb(dead), gasnet.ErrBadArg, "WaitSyncnb of a dead handle", "already synchronized")
		}
		for {
			if err := e.j.TrySyncnbiGets(); err == nil {
				break
			} else if err != gasnet.ErrNotReady {
				e.Fatalf("TrySyncnbiGets: %v", err)
			}
		}
		e.Check(e.j.WaitSyncnbiGets(), "WaitSyncnbiGets")
		got[5015] = want[5015] // not read by any form above
		for k := 5016; k < 6000; k++ {
			got[k] = want[k]
		}
		if !bytes.Equal(got, want) {
			i := firstDiff(got, want)
			e.Fatalf("get of writer %d's zone on node %d: byte %d = %#x, want %#x", w, p, i, got[i], want[i])
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// memsetBounds: memsets up to the end of a segment work; one byte past it is
// refused with the bound named, and nothing is written.
func memsetBounds(e *env) {
	p := (e.me + 1) % e.n
	end := segSize - 64*int(e.n)
	region := end + 64*int(e.me) // this node's 64 bytes near the end of p's segment
	last := e.me == e.n-1        // its region ends exactly at the segment's end
	e.Check(e.j.Memset(p, e.at(p, region), 0x11, 64), "Memset at the end")
	e.Want(e.j.Memset(p, e.at(p, region), 0x22, 64+1+uint64(segSize)), gasnet.ErrBadArg, "Memset past the end", "outside", "segment")
	_, err := e.j.MemsetNB(p, e.at(p, segSize), 0x22, 1)
	e.Want(err, gasnet.ErrBadArg, "MemsetNB past the end", "outside")
	e.Want(e.j.MemsetNBI(p, e.at(p, -1), 0x22, 2), gasnet.ErrBadArg, "MemsetNBI below the start", "outside")
	e.Want(e.j.Memset(e.n, e.at(p, region), 0x22, 1), gasnet.ErrBadArg, "Memset to a bad node", "out of range")
	e.Check(e.j.Memset(p, e.at(p, segSize+100), 0x22, 0), "Memset of 0 bytes (no-op, not checked)")
	if last {
		e.Want(e.j.Memset(p, e.at(p, region+1), 0x33, 64), gasnet.ErrBadArg, "Memset one byte past the end", "outside")
	}
	e.Barrier()
	seg := e.j.Segment()
	want := bytes.Repeat([]byte{fillByte}, 64*int(e.n))
	w := (e.me + e.n - 1) % e.n // the node that memset this node's segment
	copy(want[64*int(w):], bytes.Repeat([]byte{0x11}, 64))
	if !bytes.Equal(seg[end:], want) {
		e.Fatalf("the end of the segment after memsets: %x", seg[end:])
	}
	// A large memset (several AM chunks on the AM path) of the RMA zones.
	e.Barrier()
	if e.me == 0 {
		for q := range e.n {
			e.Check(e.j.Memset(q, e.at(q, rmaBase), 0x77, 3<<20/2), "large Memset")
		}
	}
	e.Barrier()
	if !bytes.Equal(seg[rmaBase:rmaBase+3<<20/2], bytes.Repeat([]byte{0x77}, 3<<20/2)) || seg[rmaBase+3<<20/2] == 0x77 {
		e.Fatalf("large memset did not fill exactly its range")
	}
}

// amTest is the AM part: handlers and what they saw.
type amTest struct {
	e       *env
	idx     []gasnet.Handler
	entries []gasnet.HandlerEntry
	got     atomic.Int64 // replies received
	bad     atomic.Pointer[string]
	pings   atomic.Int64
	// restrictions observed inside handlers (bit per check)
	restrictReq atomic.Uint64
	restrictRep atomic.Uint64
	barrierPing atomic.Int64
}

func argVal(src gasnet.Node, i int) gasnet.HandlerArg {
	return gasnet.HandlerArg(int(src)*1000 + i*17 - 5)
}
func amPat(src gasnet.Node, k int) byte { return byte(int(src)*31 + k*7) }

func newAMTest(e *env) *amTest {
	a := &amTest{e: e}
	a.entries = []gasnet.HandlerEntry{
		{Index: hReqIndex, Fn: a.request, Name: "test-request"},
		{Fn: a.reply, Name: "test-reply"},
		{Fn: a.restrictedRequest, Name: "test-restricted-request"},
		{Fn: func(*gasnet.Token, []byte, []gasnet.HandlerArg) { a.pings.Add(1) }, Name: "test-ping"},
		{Fn: a.restrictedReply, Name: "test-restricted-reply"},
		{Fn: func(*gasnet.Token, []byte, []gasnet.HandlerArg) { a.barrierPing.Add(1) }, Name: "test-barrier-ping"},
	}
	return a
}

func (a *amTest) table() []gasnet.HandlerEntry { return a.entries }

func (a *amTest) fail(msg string) { a.bad.CompareAndSwap(nil, &msg) }

// check validates an AM's args and payload from src; long says where a Long
// payload must be.
func (a *amTest) check(t *gasnet.Token, p []byte, args []gasnet.HandlerArg, longOff int) {
	src, err := gasnet.AMGetMsgSource(t)
	if err != nil || src >= a.e.n {
		a.fail("AMGetMsgSource: " + errString(err))
		return
	}
	for i, v := range args {
		if v != argVal(src, i) {
			a.fail("argument mismatch")
		}
	}
	for k, b := range p {
		if b != amPat(src, k) {
			a.fail("payload mismatch")
			break
		}
	}
	info, _ := t.Info(gex.TIIsLong)
	if info.IsLong && len(p) > 0 {
		rel := int(addrOf(p)) - int(addrOf(a.e.j.Segment())) - (longOff + int(src)*longArea)
		if rel < 0 || rel >= longArea || rel%longSlot != 0 || int(t.Addr())-int(a.e.segs[a.e.me].Addr) != rel+longOff+int(src)*longArea {
			a.fail("Long payload not in place")
		}
	}
}

// longRel is where in its sender's area a Long's payload landed.
func (a *amTest) longRel(t *gasnet.Token, src gasnet.Node) int {
	return int(t.Addr()) - int(a.e.segs[a.e.me].Addr) - int(src)*longArea
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// request checks the AM and replies in the same category with the same
// number of arguments and the same payload length.
func (a *amTest) request(t *gasnet.Token, p []byte, args []gasnet.HandlerArg) {
	a.check(t, p, args, 0)
	src, _ := gasnet.AMGetMsgSource(t)
	me := a.e.me
	out := make([]gasnet.HandlerArg, len(args))
	for i := range out {
		out[i] = argVal(me, i)
	}
	pl := make([]byte, len(p))
	for k := range pl {
		pl[k] = amPat(me, k)
	}
	info, _ := t.Info(gex.TIIsLong)
	var err error
	switch {
	case p == nil:
		err = a.e.j.AMReplyShort(t, a.idx[1], out...)
	case info.IsLong:
		err = a.e.j.AMReplyLong(t, a.idx[1], pl, a.e.at(src, repBase+int(me)*longArea+a.longRel(t, src)), out...)
	default:
		err = a.e.j.AMReplyMedium(t, a.idx[1], pl, out...)
	}
	if err != nil {
		a.fail("reply: " + err.Error())
	}
}

func (a *amTest) reply(t *gasnet.Token, p []byte, args []gasnet.HandlerArg) {
	a.check(t, p, args, repBase)
	a.got.Add(1)
}

// run sends every category with 0, 1 and 16 arguments to every node.
func (a *amTest) run() {
	e := a.e
	sent := int64(0)
	h := a.idx[0]
	for p := range e.n {
		slot := 0
		for _, nargs := range []int{0, 1, 16} {
			args := make([]gasnet.HandlerArg, nargs)
			for i := range args {
				args[i] = argVal(e.me, i)
			}
			e.Check(e.j.AMRequestShort(p, h, args...), "AMRequestShort")
			sent++
			for _, n := range []int{0, 1, e.j.AMMaxMedium()} {
				e.Check(e.j.AMRequestMedium(p, h, payload(e.me, n), args...), "AMRequestMedium")
				sent++
			}
			for _, n := range []int{0, 1500} {
				dst := e.at(p, int(e.me)*longArea+slot*longSlot)
				e.Check(e.j.AMRequestLong(p, h, payload(e.me, n), dst, args...), "AMRequestLong")
				dst = e.at(p, int(e.me)*longArea+(slot+1)*longSlot)
				e.Check(e.j.AMRequestLongAsync(p, h, payload(e.me, n), dst, args...), "AMRequestLongAsync")
				sent += 2
				slot += 2
			}
		}
	}
	e.Check(e.j.BlockUntil(func() bool { return a.got.Load() == sent || a.bad.Load() != nil }), "BlockUntil(replies)")
	if m := a.bad.Load(); m != nil {
		e.Fatalf("AM handlers: %s", *m)
	}
	// Bad AM input.
	e.Want(e.j.AMRequestShort(p0(e), 150), gasnet.ErrBadArg, "AM to an unregistered handler", "handler 150", "not registered")
	e.Want(e.j.AMRequestShort(e.n, h), gasnet.ErrBadArg, "AM to a bad node", "out of range")
	e.Want(e.j.AMRequestMedium(0, h, make([]byte, e.j.AMMaxMedium()+1)), gasnet.ErrBadArg, "Medium over the max", "exceeds")
	e.Want(e.j.AMRequestLong(0, h, make([]byte, e.j.AMMaxLongRequest()+1), e.at(0, 0)), gasnet.ErrBadArg, "Long over the max", "exceeds")
	e.Want(e.j.AMRequestShort(0, h, make([]gasnet.HandlerArg, 17)...), gasnet.ErrBadArg, "17 arguments", "MaxArgs")
	e.Want(e.j.AMRequestLong(0, h, make([]byte, 10), e.at(0, segSize-5)), gasnet.ErrBadArg, "Long outside the segment", "outside")
	e.Want(e.j.AMReplyShort(nil, h), gasnet.ErrBadArg, "AMReplyShort without a token", "token")
}

func p0(e *env) gasnet.Node { return 0 }

func payload(src gasnet.Node, n int) []byte {
	p := make([]byte, n)
	for k := range p {
		p[k] = amPat(src, k)
	}
	return p
}

// restriction checks run inside handlers: bit i set = check i passed.
const (
	rReqRequest = 1 << iota
	rReqPoll
	rReqBlock
	rReqBarrier
	rReqPut
	rReqHold
	rReqSecondReply
	rRepReply
	rRepRequest
	rAll = 1<<iota - 1
)

func (a *amTest) restrictedRequest(t *gasnet.Token, _ []byte, _ []gasnet.HandlerArg) {
	j := a.e.j
	var ok uint64
	if errorsIs(j.AMRequestShort(a.e.me, a.idx[3]), gex.ErrRestricted) {
		ok |= rReqRequest
	}
	if errorsIs(j.AMPoll(), gex.ErrRestricted) {
		ok |= rReqPoll
	}
	if errorsIs(j.BlockUntil(func() bool { return true }), gex.ErrRestricted) {
		ok |= rReqBlock
	}
	if errorsIs(j.BarrierNotify(0, 0), gex.ErrRestricted) {
		ok |= rReqBarrier
	}
	if errorsIs(j.Put(a.e.me, a.e.at(a.e.me, 0), []byte{1}), gex.ErrRestricted) {
		ok |= rReqPut
	}
	if j.HoldInterrupts() == nil && j.ResumeInterrupts() == nil {
		ok |= rReqHold // ignored in handler context
	}
	if err := j.AMReplyShort(t, a.idx[4]); err != nil {
		a.fail("reply from the restricted handler: " + err.Error())
	}
	if errorsIs(j.AMReplyShort(t, a.idx[4]), gasnet.ErrBadArg) {
		ok |= rReqSecondReply
	}
	a.restrictReq.Store(ok | 1<<62)
}

func (a *amTest) restrictedReply(t *gasnet.Token, _ []byte, _ []gasnet.HandlerArg) {
	j := a.e.j
	var ok uint64
	if errorsIs(j.AMReplyShort(t, a.idx[4]), gex.ErrRestricted) {
		ok |= rRepReply
	}
	if errorsIs(j.AMRequestShort(a.e.me, a.idx[3]), gex.ErrRestricted) {
		ok |= rRepRequest
	}
	a.restrictRep.Store(ok | 1<<62)
}

// restrictions: handler rules, No-Interrupt Sections, HSLs.
func restrictions(e *env, a *amTest) {
	e.Check(e.j.AMRequestShort(e.me, a.idx[2]), "AMRequestShort(restricted)")
	e.Check(e.j.BlockUntil(func() bool { return a.restrictReq.Load() != 0 && a.restrictRep.Load() != 0 }), "BlockUntil(restricted)")
	if got := (a.restrictReq.Load() | a.restrictRep.Load()) &^ (1 << 62); got != rAll {
		e.Fatalf("handler restrictions: checks passed %#b, want %#b", got, rAll)
	}
	// No-Interrupt Sections.
	e.Check(e.j.HoldInterrupts(), "HoldInterrupts")
	e.Want(e.j.HoldInterrupts(), gasnet.ErrBadArg, "nested HoldInterrupts", "nested")
	e.Want(e.j.Put(e.me, e.at(e.me, 0), []byte{1}), gex.ErrRestricted, "Put in a No-Interrupt Section")
	e.Want(e.j.AMPoll(), gex.ErrRestricted, "AMPoll in a No-Interrupt Section", "No-Interrupt Section")
	var h gasnet.HSL
	gasnet.HSLLock(&h) // permitted inside a section
	gasnet.HSLUnlock(&h)
	_ = e.j.Mynode()
	e.Check(e.j.ResumeInterrupts(), "ResumeInterrupts")
	e.Want(e.j.ResumeInterrupts(), gasnet.ErrBadArg, "ResumeInterrupts without Hold", "paired")
	e.Check(e.j.Put(e.me, e.at(e.me, 0), []byte{fillByte}), "Put after the section")
	// HSLs: the zero value is GASNET_HSL_INITIALIZER; trylock fails while
	// another goroutine holds it; communication is refused while held.
	var l gasnet.HSL
	gasnet.HSLInit(&l)
	gasnet.HSLLock(&l)
	e.Want(e.j.AMPoll(), gex.ErrRestricted, "AMPoll holding an HSL")
	done := make(chan error)
	go func() { done <- gasnet.HSLTrylock(&l) }()
	if err := <-done; err != gasnet.ErrNotReady {
		e.Fatalf("HSLTrylock of a held HSL: %v, want ErrNotReady", err)
	}
	gasnet.HSLUnlock(&l)
	e.Check(gasnet.HSLTrylock(&l), "HSLTrylock")
	gasnet.HSLUnlock(&l)
	gasnet.HSLDestroy(&l)
}

func testingLoopOnly() bool { return os.Getenv(envConduit) == "loop" }

func errorsIs(err, target error) bool { return errors.Is(err, target) }
