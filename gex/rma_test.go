package gex_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Conformance of one-sided RMA, GASNet-EX "Extended API" (gex_RMA_*), on both
// of gexgo's paths (rma.go): (a) the target's segment is mapped here (self
// and neighbourhood peers: a copy through the mapping) and (b) it is not
// (GASNET_SUPERNODE_MAXSIZE=1: the AM reference protocol). Self is always
// path (a).
//
// The sentences the assertions come from:
//
//   - GASNet-1 §3.2 (whose semantics GASNet-EX keeps): "nbytes must be >= 0
//     and has no maximum size"; a blocking put or get "blocks until the
//     transfer is complete".
//   - GASNet-1 §3.3.1: "Successful synchronization of a put operation means
//     the source data has been written to the destination location and get
//     operations issued subsequently by any thread (or load instructions
//     issued by the destination node) will receive the new value".
//   - Extended API NOTE 1: an initiation call is a "no op" only with
//     GEX_FLAG_IMMEDIATE, and "In the "no op" case no communication has been
//     performed".
//   - NOTE 2a/2b: which lc_opt values an NBI and an NB put take, and when the
//     source may be reused.
//   - NOTE 3/4: SELF_SEG_OFFSET / PEER_SEG_OFFSET, and "In all cases, the
//     remote memory must be in the remote bound segment".
//   - NOTE 5: overlap of source and destination "High-quality implementations
//     may choose to diagnose"; gexgo does, with GASNET_ERR_BAD_ARG.
//   - GASNet-1 "Register-to-remote-memory put": the value written "is a direct
//     byte copy of the 8*nbytes low-order bits of value, written with the
//     endianness appropriate for an nbytes integral value"; the value get
//     returns those bytes "setting the high-order bits (if any) to zero".

// rmaPaths are the two RMA paths, selected by GASNET_SUPERNODE_MAXSIZE.
var rmaPaths = [...]struct {
	name      string
	supernode int
}{{"mapped", 0}, {"unmapped", 1}}

// forPaths runs f once per RMA path, as subtests "mapped" and "unmapped".
func forPaths(t *testing.T, f func(t *testing.T, supernode int)) {
	for _, p := range rmaPaths {
		t.Run(p.name, func(t *testing.T) { f(t, p.supernode) })
	}
}

// rmaBase is a fixed pseudo-random byte sequence. The payload of a transfer
// is a window of it chosen by a seed (rmaData), so the expected bytes of any
// transfer cost nothing to produce, on the initiator, on the target and in a
// replay.
var rmaBase = sync.OnceValue(func() []byte {
	b := make([]byte, 4<<20+rmaWindows)
	x := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	return b
})

// rmaWindows is the number of distinct windows: seeds below it give distinct
// data.
const rmaWindows = 1 << 16

// rmaData is the n-byte payload for seed (n <= 4 MiB). It is shared: never
// write to it (copy it first where a test overwrites a source).
func rmaData(seed uint64, n int) []byte {
	off := int(seed * 0x9e3779b1 % rmaWindows) // odd multiplier: a bijection mod 2^16
	return rmaBase()[off : off+n : off+n]
}

// rmaCopy returns a private copy of rmaData(seed, n).
func rmaCopy(seed uint64, n int) []byte { return append([]byte(nil), rmaData(seed, n)...) }

// rmaSeg returns rank r's bound segment as this rank sees it.
func rmaSeg(e *rankEnv, r gex.Rank) gex.BoundSegment {
	e.t.Helper()
	bs, _, err := e.tm.QueryBoundSegmentNB(r, gex.FlagImmediate)
	e.Check(err, fmt.Sprintf("QueryBoundSegmentNB(%d)", r))
	if bs.Size == 0 {
		e.Fatalf("rank %d has no bound segment", r)
	}
	return bs
}

// fill sets every byte of b to v (by doubling copies: cheap under -race).
func fill(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	b[0] = v
	for i := 1; i < len(b); i *= 2 {
		copy(b[i:], b[:i])
	}
}

// firstDiff returns the first index where got and want differ, or -1 if they
// are equal (and of the same length).
func firstDiff(got, want []byte) int {
	if bytes.Equal(got, want) {
		return -1
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return i
		}
	}
	return min(len(got), len(want))
}

// firstNot returns the first index of b whose byte is not v, or -1.
func firstNot(b []byte, v byte) int {
	var ref [4096]byte
	fill(ref[:], v)
	for i := 0; i < len(b); i += len(ref) {
		c := b[i:min(len(b), i+len(ref))]
		if !bytes.Equal(c, ref[:len(c)]) {
			return i + firstDiff(c, ref[:len(c)])
		}
	}
	return -1
}

// wantBytes ends the job if got != want, naming the first differing byte.
func wantBytes(e *rankEnv, what string, got, want []byte) {
	e.t.Helper()
	if i := firstDiff(got, want); i >= 0 {
		if i < len(got) && i < len(want) {
			e.Fatalf("%s: byte %d of %d is %#x, want %#x", what, i, len(want), got[i], want[i])
		}
		e.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
}

// wantFilled ends the job unless every byte of b is v.
func wantFilled(e *rankEnv, what string, b []byte, v byte) {
	e.t.Helper()
	if i := firstNot(b, v); i >= 0 {
		e.Fatalf("%s: byte %d of %d is %#x, want %#x", what, i, len(b), b[i], v)
	}
}

// expectRMAErr ends the job unless err wraps ErrBadArg (and is not the no-op
// result) and its message names every word.
func expectRMAErr(e *rankEnv, what string, err error, words ...string) {
	e.t.Helper()
	if err == nil || !errors.Is(err, gex.ErrBadArg) || errors.Is(err, gex.ErrNoOp) {
		e.Fatalf("%s: returned %v, want an error wrapping ErrBadArg", what, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			e.Fatalf("%s: error %q does not name %q", what, err, w)
		}
	}
}

// rmaFlavour is one of the three synchronisation styles of gex_RMA_*.
type rmaFlavour int

const (
	viaBlocking rmaFlavour = iota // gex_RMA_{Put,Get}Blocking
	viaNBI                        // gex_RMA_{Put,Get}NBI + gex_NBI_Wait
	viaNB                         // gex_RMA_{Put,Get}NB + gex_Event_Wait
)

var rmaFlavours = [...]rmaFlavour{viaBlocking, viaNBI, viaNB}

func (f rmaFlavour) String() string { return [...]string{"Blocking", "NBI", "NB"}[f] }

// xfer is one transfer: buf is the source of a put or the destination of a get.
type xfer struct {
	rank gex.Rank
	addr gex.Addr
	buf  []byte
}

// putAll initiates every put of xs with flavour f (all in flight at once for
// NBI and NB) and returns once all of them are complete.
func putAll(e *rankEnv, f rmaFlavour, xs []xfer, flags gex.Flags) {
	e.t.Helper()
	var evs []gex.Event
	for _, x := range xs {
		var err error
		switch f {
		case viaBlocking:
			err = e.tm.PutBlocking(x.rank, x.addr, x.buf, flags)
		case viaNBI:
			err = e.tm.PutNBI(x.rank, x.addr, x.buf, nil, flags)
		case viaNB:
			var ev gex.Event
			ev, err = e.tm.PutNB(x.rank, x.addr, x.buf, nil, flags)
			evs = append(evs, ev)
		}
		e.Check(err, fmt.Sprintf("Put%v of %d bytes to rank %d at %#x", f, len(x.buf), x.rank, x.addr))
	}
	switch f {
	case viaNBI:
		e.Check(e.c.NBIWait(gex.ECPut, 0), "NBIWait(ECPut)")
	case viaNB:
		for i, ev := range evs {
			e.Check(ev.Wait(), fmt.Sprintf("Wait on PutNB %d", i))
		}
	}
}

// getAll is putAll for gets.
func getAll(e *rankEnv, f rmaFlavour, xs []xfer, flags gex.Flags) {
	e.t.Helper()
	var evs []gex.Event
	for _, x := range xs {
		var err error
		switch f {
		case viaBlocking:
			err = e.tm.GetBlocking(x.buf, x.rank, x.addr, flags)
		case viaNBI:
			err = e.tm.GetNBI(x.buf, x.rank, x.addr, flags)
		case viaNB:
			var ev gex.Event
			ev, err = e.tm.GetNB(x.buf, x.rank, x.addr, flags)
			evs = append(evs, ev)
		}
		e.Check(err, fmt.Sprintf("Get%v of %d bytes from rank %d at %#x", f, len(x.buf), x.rank, x.addr))
	}
	switch f {
	case viaNBI:
		e.Check(e.c.NBIWait(gex.ECGet, 0), "NBIWait(ECGet)")
	case viaNB:
		for i, ev := range evs {
			e.Check(ev.Wait(), fmt.Sprintf("Wait on GetNB %d", i))
		}
	}
}

// bigEndian reports this machine's byte order.
var bigEndian = binary.NativeEndian.Uint16([]byte{1, 0}) != 1

// valImage is what a value put of nbytes must leave in memory: the 8*nbytes
// low-order bits of v "written with the endianness appropriate for an nbytes
// integral value on the current architecture".
func valImage(v uint64, nbytes int) []byte {
	b := make([]byte, nbytes)
	for i := range b {
		shift := 8 * i
		if bigEndian {
			shift = 8 * (nbytes - 1 - i)
		}
		b[i] = byte(v >> shift)
	}
	return b
}

// valOf reads b as an len(b)-byte unsigned integer in this machine's byte
// order (the inverse of valImage).
func valOf(b []byte) uint64 {
	var v uint64
	for i := range b {
		shift := 8 * i
		if bigEndian {
			shift = 8 * (len(b) - 1 - i)
		}
		v |= uint64(b[i]) << shift
	}
	return v
}

// valMask keeps the low nbytes of v.
func valMask(v uint64, nbytes int) uint64 {
	if nbytes == 8 {
		return v
	}
	return v & (1<<(8*nbytes) - 1)
}

// rmaSizes are the transfer sizes every flavour is run with: empty, below,
// at and above a word, a page, the AM chunk size (64 KiB), and multi-chunk.
var rmaSizes = [...]int{0, 1, 7, 8, 9, 4095, 4096, 65535, 65536, 1<<20 + 3, 4 << 20}

// sizesZone is one writer's zone in every target segment.
const sizesZone = 4<<20 + 8<<10

func sizesOffset(si int) uint64 {
	if si%2 == 0 {
		return 0 // page-aligned
	}
	return uint64(si * 613 % 4096) // unaligned
}

func sizesSeed(f rmaFlavour, si int, writer, target gex.Rank) uint64 {
	return uint64(((int(f)*len(rmaSizes)+si)*8+int(writer))*8 + int(target))
}

// TestRMASizes: every size with every flavour from every rank to every rank
// (itself included), each rank writing only its own zone of each target
// segment. After each round the target checks its whole segment (the data in
// every writer's zone and nothing anywhere else) and every writer reads its
// zones back with the same flavour.
func TestRMASizes(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		const n = 3
		conformance(t, n, jobOpts{segSize: n * sizesZone, supernode: sn}, rmaSizesBody)
	})
}

func rmaSizesBody(e *rankEnv) {
	mine := e.seg.Bytes()
	clear(mine)
	bases := make([]gex.Addr, e.size)
	bufs := make([][]byte, e.size)
	for r := range e.size {
		bases[r] = rmaSeg(e, r).Owner
		bufs[r] = make([]byte, 4<<20)
	}
	zoneOf := func(w gex.Rank) []byte { return mine[uint64(w)*sizesZone : uint64(w+1)*sizesZone] }
	e.Barrier() // every segment is clear
	for _, f := range rmaFlavours {
		for si, n := range rmaSizes {
			off := sizesOffset(si)
			var puts, gets []xfer
			for r := range e.size {
				a := bases[r] + gex.Addr(uint64(e.rank)*sizesZone+off)
				puts = append(puts, xfer{r, a, rmaData(sizesSeed(f, si, e.rank, r), n)})
				dst := bufs[r][:n]
				fill(dst, 0xA5)
				gets = append(gets, xfer{r, a, dst})
			}
			putAll(e, f, puts, 0)
			e.Barrier()
			// Target side: each writer's bytes are in its zone, and nothing
			// else in the segment changed.
			for w := range e.size {
				z := zoneOf(w)
				what := fmt.Sprintf("Put%v of %d bytes from rank %d, seen by the target", f, n, w)
				wantFilled(e, what+" (before the range)", z[:off], 0)
				wantBytes(e, what, z[off:off+uint64(n)], rmaData(sizesSeed(f, si, w, e.rank), n))
				wantFilled(e, what+" (after the range)", z[off+uint64(n):], 0)
			}
			// Initiator side: read every zone back.
			getAll(e, f, gets, 0)
			for _, g := range gets {
				wantBytes(e, fmt.Sprintf("Get%v of %d bytes from rank %d", f, n, g.rank), g.buf, rmaData(sizesSeed(f, si, e.rank, g.rank), n))
			}
			e.Barrier() // everyone has read
			for w := range e.size {
				clear(zoneOf(w)[off : off+uint64(n)])
			}
			e.Barrier() // everyone has cleared
		}
	}
	rmaValRound(e, bases, zoneOf)
}

// rmaValRound runs the value forms, nbytes 1..8, every rank to every rank.
func rmaValRound(e *rankEnv, bases []gex.Addr, zoneOf func(gex.Rank) []byte) {
	type valOp struct {
		kind   int // 0 PutBlockingVal, 1 PutNBIVal, 2 PutNBVal
		nbytes int
		off    uint64
	}
	var ops []valOp
	for kind := range 3 {
		for nb := 1; nb <= 8; nb++ {
			ops = append(ops, valOp{kind, nb, uint64(256*kind + 16*nb + nb%5)}) // mostly unaligned
		}
	}
	value := func(writer, target gex.Rank, i int) uint64 {
		return binary.LittleEndian.Uint64(rmaData(uint64(50000+int(writer)*1000+int(target)*100+i), 8))
	}
	for r := range e.size {
		var evs []gex.Event
		for i, op := range ops {
			a := bases[r] + gex.Addr(uint64(e.rank)*sizesZone+op.off)
			v := value(e.rank, r, i)
			var err error
			switch op.kind {
			case 0:
				err = e.tm.PutBlockingVal(r, a, v, op.nbytes, 0)
			case 1:
				err = e.tm.PutNBIVal(r, a, v, op.nbytes, 0)
			case 2:
				var ev gex.Event
				ev, err = e.tm.PutNBVal(r, a, v, op.nbytes, 0)
				evs = append(evs, ev)
			}
			e.Check(err, fmt.Sprintf("value put %d (%d bytes) to rank %d", op.kind, op.nbytes, r))
		}
		e.Check(e.c.NBIWait(gex.ECPut, 0), "NBIWait(ECPut) after PutNBIVal")
		e.Check(gex.EventWaitAll(evs, 0), "EventWaitAll after PutNBVal")
	}
	e.Barrier()
	for w := range e.size {
		want := make([]byte, 1024)
		for i, op := range ops {
			copy(want[op.off:], valImage(value(w, e.rank, i), op.nbytes))
		}
		z := zoneOf(w)
		wantBytes(e, fmt.Sprintf("value puts from rank %d, seen by the target", w), z[:len(want)], want)
		wantFilled(e, fmt.Sprintf("value puts from rank %d: rest of the zone", w), z[len(want):], 0)
	}
	for r := range e.size {
		for i, op := range ops {
			a := bases[r] + gex.Addr(uint64(e.rank)*sizesZone+op.off)
			got, err := e.tm.GetBlockingVal(r, a, op.nbytes, 0)
			e.Check(err, "GetBlockingVal")
			if want := valMask(value(e.rank, r, i), op.nbytes); got != want {
				e.Fatalf("GetBlockingVal(%d bytes) from rank %d = %#x, want %#x", op.nbytes, r, got, want)
			}
		}
	}
	// nbytes outside [1, sizeof(gex_RMA_Value_t)] is refused.
	a := bases[e.rank] + gex.Addr(uint64(e.rank)*sizesZone+2048)
	for _, nb := range []int{0, 9, -1} {
		_, err := e.tm.GetBlockingVal(e.rank, a, nb, 0)
		expectRMAErr(e, fmt.Sprintf("GetBlockingVal nbytes %d", nb), err, "nbytes")
		expectRMAErr(e, fmt.Sprintf("PutBlockingVal nbytes %d", nb), e.tm.PutBlockingVal(e.rank, a, 1, nb, 0), "nbytes")
		expectRMAErr(e, fmt.Sprintf("PutNBIVal nbytes %d", nb), e.tm.PutNBIVal(e.rank, a, 1, nb, 0), "nbytes")
		_, err = e.tm.PutNBVal(e.rank, a, 1, nb, 0)
		expectRMAErr(e, fmt.Sprintf("PutNBVal nbytes %d", nb), err, "nbytes")
	}
	wantFilled(e, "zone after refused value puts", zoneOf(e.rank)[1024:], 0)
}

// TestRMAZeroLength: "nbytes must be >= 0": a transfer of no bytes names no
// memory, so it succeeds and touches nothing, wherever its address points
// (and whether or not the target has a segment).
func TestRMAZeroLength(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 2, jobOpts{segSize: 1 << 16, supernode: sn}, func(e *rankEnv) {
			rmaZeroLength(e, true)
		})
	})
	t.Run("no segment", func(t *testing.T) {
		conformance(t, 2, jobOpts{}, func(e *rankEnv) { rmaZeroLength(e, false) })
	})
}

func rmaZeroLength(e *rankEnv, withSeg bool) {
	if withSeg {
		fill(e.seg.Bytes(), 0x3C)
	}
	e.Barrier()
	for r := range e.size {
		addrs := []gex.Addr{0, 1, ^gex.Addr(0)}
		if withSeg {
			bs := rmaSeg(e, r)
			end := bs.Owner + gex.Addr(bs.Size)
			addrs = append(addrs, bs.Owner-1, end, end+1<<20, bs.Owner)
		}
		for _, a := range addrs {
			for _, flags := range []gex.Flags{0, gex.FlagPeerSegOffset} {
				for _, buf := range [][]byte{nil, make([]byte, 0, 8)} {
					what := func(op string) string {
						return fmt.Sprintf("%s of 0 bytes to rank %d at %#x, flags %v", op, r, a, flags)
					}
					e.Check(e.tm.PutBlocking(r, a, buf, flags), what("PutBlocking"))
					e.Check(e.tm.PutNBI(r, a, buf, nil, flags), what("PutNBI"))
					ev, err := e.tm.PutNB(r, a, buf, nil, flags)
					e.Check(err, what("PutNB"))
					e.Check(ev.Wait(), what("Wait on PutNB"))
					e.Check(e.tm.GetBlocking(buf, r, a, flags), what("GetBlocking"))
					e.Check(e.tm.GetNBI(buf, r, a, flags), what("GetNBI"))
					ev, err = e.tm.GetNB(buf, r, a, flags)
					e.Check(err, what("GetNB"))
					e.Check(ev.Wait(), what("Wait on GetNB"))
				}
			}
		}
	}
	e.Check(e.c.NBITest(gex.ECAll, 0), "NBITest(ECAll) after zero-length NBI operations")
	e.Barrier()
	if withSeg {
		wantFilled(e, "segment after zero-length puts", e.seg.Bytes(), 0x3C)
	}
}

// TestRMABounds: NOTE 4, "In all cases, the remote memory must be in the
// remote bound segment". Every flavour refuses a range outside it (before
// the base, past the end, straddling either end, wrapping), a rank outside
// the team, and a rank with no segment, with GASNET_ERR_BAD_ARG naming the
// rank and range; a refused put changes no byte of the target segment and a
// refused get none of the destination.
func TestRMABounds(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		const segSize = 1 << 16
		conformance(t, 3, jobOpts{segSize: segSize, supernode: sn}, rmaBounds)
	})
	t.Run("no segment", func(t *testing.T) {
		conformance(t, 2, jobOpts{}, func(e *rankEnv) {
			for r := range e.size {
				src := rmaCopy(1, 8)
				dst := make([]byte, 8)
				fill(dst, 0x5A)
				word := fmt.Sprintf("rank %d", r)
				expectRMAErr(e, "PutBlocking to a rank with no segment", e.tm.PutBlocking(r, 0x10000, src, 0), word)
				expectRMAErr(e, "PutNBI to a rank with no segment", e.tm.PutNBI(r, 0x10000, src, nil, 0), word)
				_, err := e.tm.PutNB(r, 0x10000, src, nil, 0)
				expectRMAErr(e, "PutNB to a rank with no segment", err, word)
				expectRMAErr(e, "PutBlockingVal to a rank with no segment", e.tm.PutBlockingVal(r, 0x10000, 7, 8, 0), word)
				expectRMAErr(e, "GetBlocking from a rank with no segment", e.tm.GetBlocking(dst, r, 0x10000, 0), word)
				expectRMAErr(e, "GetNBI from a rank with no segment", e.tm.GetNBI(dst, r, 0x10000, 0), word)
				_, err = e.tm.GetNB(dst, r, 0x10000, 0)
				expectRMAErr(e, "GetNB from a rank with no segment", err, word)
				_, err = e.tm.GetBlockingVal(r, 0x10000, 8, 0)
				expectRMAErr(e, "GetBlockingVal from a rank with no segment", err, word)
				wantFilled(e, "destination of a refused get", dst, 0x5A)
			}
			e.Check(e.c.NBITest(gex.ECAll, 0), "NBITest(ECAll) after refused NBI operations")
		})
	})
}

// rmaRefusedAll runs every put and get flavour on (r, a, n) and expects each
// to be refused naming words; gets must leave their destination alone.
func rmaRefusedAll(e *rankEnv, what string, r gex.Rank, a gex.Addr, n int, flags gex.Flags, words ...string) {
	e.t.Helper()
	src := rmaCopy(uint64(n), n)
	dst := make([]byte, n)
	fill(dst, 0x5A)
	w := func(op string) string {
		return fmt.Sprintf("%s %s (rank %d, %#x, %d bytes, flags %v)", op, what, r, a, n, flags)
	}
	expectRMAErr(e, w("PutBlocking"), e.tm.PutBlocking(r, a, src, flags), words...)
	expectRMAErr(e, w("PutNBI"), e.tm.PutNBI(r, a, src, nil, flags), words...)
	_, err := e.tm.PutNB(r, a, src, nil, flags)
	expectRMAErr(e, w("PutNB"), err, words...)
	expectRMAErr(e, w("GetBlocking"), e.tm.GetBlocking(dst, r, a, flags), words...)
	expectRMAErr(e, w("GetNBI"), e.tm.GetNBI(dst, r, a, flags), words...)
	_, err = e.tm.GetNB(dst, r, a, flags)
	expectRMAErr(e, w("GetNB"), err, words...)
	if n <= 8 {
		expectRMAErr(e, w("PutBlockingVal"), e.tm.PutBlockingVal(r, a, 0x1122334455667788, n, flags), words...)
		expectRMAErr(e, w("PutNBIVal"), e.tm.PutNBIVal(r, a, 0x1122334455667788, n, flags), words...)
		_, err = e.tm.PutNBVal(r, a, 0x1122334455667788, n, flags)
		expectRMAErr(e, w("PutNBVal"), err, words...)
		_, err = e.tm.GetBlockingVal(r, a, n, flags)
		expectRMAErr(e, w("GetBlockingVal"), err, words...)
	}
	wantFilled(e, w("destination of a refused get"), dst, 0x5A)
}

func rmaBounds(e *rankEnv) {
	mine := e.seg.Bytes()
	copy(mine, rmaData(uint64(100+e.rank), len(mine))) // the snapshot every target checks at the end
	e.Barrier()
	for r := range e.size {
		bs := rmaSeg(e, r)
		base, size := bs.Owner, bs.Size
		end := base + gex.Addr(size)
		rk := fmt.Sprintf("rank %d", r)
		hex := func(a gex.Addr) string { return fmt.Sprintf("%#x", uintptr(a)) }
		for _, c := range []struct {
			what string
			a    gex.Addr
			n    int
		}{
			{"before the base", base - 1, 1},
			{"straddling the base", base - 4, 8},
			{"at the end", end, 1},
			{"past the end", end + 4096, 8},
			{"straddling the end", end - 4, 8},
			{"straddling the end by one byte", end - 7, 8}, // the fast path's lim8 bound
			{"straddling the base by one byte", base - 1, 8},
			{"one byte too long", base, int(size) + 1},
			{"at address 0", 0, 8},
			{"wrapping the address space", ^gex.Addr(0) - 3, 8},
		} {
			rmaRefusedAll(e, c.what, r, c.a, c.n, 0, rk, hex(c.a))
		}
		// The last 8 bytes are inside (the bound is inclusive of the
		// last byte; an 8-byte get is the inlined fast path where mapped).
		last := make([]byte, 8)
		e.Check(e.tm.GetBlocking(last, r, end-8, 0), rk+": GetBlocking of the segment's last 8 bytes")
		wantBytes(e, rk+": the segment's last 8 bytes", last, rmaData(uint64(100+r), int(size))[size-8:])
		// PEER_SEG_OFFSET: the address is an offset into the segment, with
		// the same bound.
		for _, c := range []struct {
			what string
			off  gex.Addr
			n    int
		}{
			{"offset at the end", gex.Addr(size), 1},
			{"offset straddling the end", gex.Addr(size) - 4, 8},
			{"offset past the end", gex.Addr(size) + 1<<20, 8},
			{"huge offset", ^gex.Addr(0) - 3, 8},
		} {
			rmaRefusedAll(e, c.what, r, c.off, c.n, gex.FlagPeerSegOffset, rk)
		}
	}
	// A rank outside the team.
	for _, r := range []gex.Rank{e.size, e.size + 7, gex.RankInvalid} {
		rmaRefusedAll(e, "to a rank outside the team", r, rmaSeg(e, 0).Owner, 8, 0, fmt.Sprintf("rank %d", r))
	}
	e.Check(e.c.NBITest(gex.ECAll, 0), "NBITest(ECAll) after refused NBI operations")
	e.Barrier()
	wantBytes(e, "segment after refused puts (compared with its snapshot)", mine, rmaData(uint64(100+e.rank), len(mine)))
}

// TestRMAOverlap: NOTE 5 (overlap of source and destination within one
// operation) is diagnosed: a put or get between two overlapping ranges of the
// caller's own segment (or, where it is mapped, of a peer's segment) is
// refused and changes nothing; adjacent ranges are fine.
func TestRMAOverlap(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, 2, jobOpts{segSize: 1 << 16, supernode: sn}, func(e *rankEnv) {
			mine := e.seg.Bytes()
			copy(mine, rmaData(uint64(200+e.rank), len(mine)))
			snap := append([]byte(nil), mine...)
			base := e.seg.QueryAddr()
			for _, c := range []struct {
				what     string
				lo, n    int
				remoteLo int
			}{
				{"partial overlap, remote above", 0, 100, 50},
				{"partial overlap, remote below", 100, 100, 50},
				{"identical ranges", 300, 64, 300},
				{"last byte of local is first of remote", 400, 100, 499},
				{"first byte of local is last of remote", 600, 100, 501},
				// 8 bytes: the mapped fast path's own one-compare check.
				{"8 bytes, remote 7 above", 700, 8, 707},
				{"8 bytes, remote 7 below", 720, 8, 713},
				{"8 bytes, identical ranges", 740, 8, 740},
			} {
				local := mine[c.lo : c.lo+c.n]
				ra := base + gex.Addr(c.remoteLo)
				w := fmt.Sprintf("%s to self: local [%d, +%d), remote offset %d", c.what, c.lo, c.n, c.remoteLo)
				expectRMAErr(e, "PutBlocking "+w, e.tm.PutBlocking(e.rank, ra, local, 0), "overlap")
				expectRMAErr(e, "PutNBI "+w, e.tm.PutNBI(e.rank, ra, local, nil, 0), "overlap")
				_, err := e.tm.PutNB(e.rank, ra, local, nil, 0)
				expectRMAErr(e, "PutNB "+w, err, "overlap")
				expectRMAErr(e, "GetBlocking "+w, e.tm.GetBlocking(local, e.rank, ra, 0), "overlap")
				expectRMAErr(e, "GetNBI "+w, e.tm.GetNBI(local, e.rank, ra, 0), "overlap")
				_, err = e.tm.GetNB(local, e.rank, ra, 0)
				expectRMAErr(e, "GetNB "+w, err, "overlap")
				wantBytes(e, "own segment after refused overlapping transfers", mine, snap)
			}
			// Adjacent ranges do not overlap: the copy happens.
			e.Check(e.tm.PutBlocking(e.rank, base+1000, mine[900:1000], 0), "PutBlocking between adjacent ranges")
			wantBytes(e, "adjacent put", mine[1000:1100], snap[900:1000])
			e.Check(e.tm.GetBlocking(mine[2000:2100], e.rank, base+2100, 0), "GetBlocking between adjacent ranges")
			wantBytes(e, "adjacent get", mine[2000:2100], snap[2100:2200])
			e.Check(e.tm.PutBlocking(e.rank, base+3008, mine[3000:3008], 0), "8-byte PutBlocking between adjacent ranges")
			wantBytes(e, "adjacent 8-byte put", mine[3008:3016], snap[3000:3008])
			e.Check(e.tm.GetBlocking(mine[3100:3108], e.rank, base+3092, 0), "8-byte GetBlocking between adjacent ranges")
			wantBytes(e, "adjacent 8-byte get", mine[3100:3108], snap[3092:3100])
			e.Barrier()
			// A peer's segment mapped here (path (a) only): local and remote
			// ranges in the same peer segment.
			peer := (e.rank + 1) % e.size
			if bs := rmaSeg(e, peer); bs.Local != nil {
				local := bs.Local[4096:4160]
				expectRMAErr(e, "PutBlocking from a peer's mapped segment onto itself", e.tm.PutBlocking(peer, bs.Owner+4096+32, local, 0), "overlap")
				expectRMAErr(e, "GetBlocking into a peer's mapped segment from itself", e.tm.GetBlocking(local, peer, bs.Owner+4096-32, 0), "overlap")
			}
			e.Barrier()
			wantBytes(e, "own segment after peers' refused overlapping transfers", mine[4000:5000], snap[4000:5000])
		})
	})
}

// zoneAlloc hands out consecutive, non-overlapping ranges of a writer's zone.
type zoneAlloc struct{ next, end uint64 }

func (z *zoneAlloc) take(e *rankEnv, n int) uint64 {
	off := z.next
	z.next += uint64(n+63) &^ 63
	if z.next > z.end {
		e.Fatalf("test zone exhausted (%d > %d)", z.next, z.end)
	}
	return off
}

// TestRMALocalCompletion: NOTE 2a/2b. With lc_opt nil or EventNow the source
// may be overwritten as soon as the put returns; with EventDefer once the
// operation is complete; with EventGroup once gex_NBI_Wait(GEX_EC_LC)
// returned; with a leaf event once the leaf completed. None of these
// overwrites changes what arrives. EventGroup is refused for an NB put and a
// leaf *Event for an NBI put, and a refused put writes nothing.
func TestRMALocalCompletion(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		const zone = 2 << 20
		conformance(t, 2, jobOpts{segSize: 2 * zone, supernode: sn}, func(e *rankEnv) {
			clear(e.seg.Bytes())
			e.Barrier()
			seed := uint64(300 + 100*e.rank)
			for r := range e.size {
				base := rmaSeg(e, r).Owner + gex.Addr(uint64(e.rank)*zone)
				z := zoneAlloc{0, zone}
				for _, n := range []int{8, 4096, 100_000} {
					type put struct {
						what string
						off  uint64
						want []byte
					}
					var done []put
					scribble := func(src []byte) { fill(src, 0xEE) }
					one := func(what string, issue func(a gex.Addr, src []byte)) {
						seed++
						off := z.take(e, n)
						src := rmaCopy(seed, n)
						issue(base+gex.Addr(off), src)
						done = append(done, put{what, off, rmaData(seed, n)})
					}
					w := func(op string) string { return fmt.Sprintf("%s of %d bytes to rank %d", op, n, r) }
					one("PutBlocking", func(a gex.Addr, src []byte) {
						e.Check(e.tm.PutBlocking(r, a, src, 0), w("PutBlocking"))
						scribble(src)
					})
					for _, lc := range []*gex.Event{nil, gex.EventNow} {
						one("PutNBI, lc nil/EventNow", func(a gex.Addr, src []byte) {
							e.Check(e.tm.PutNBI(r, a, src, lc, 0), w("PutNBI"))
							scribble(src) // locally complete on return
							e.Check(e.c.NBIWait(gex.ECPut, 0), "NBIWait(ECPut)")
						})
						one("PutNB, lc nil/EventNow", func(a gex.Addr, src []byte) {
							ev, err := e.tm.PutNB(r, a, src, lc, 0)
							e.Check(err, w("PutNB"))
							scribble(src) // locally complete on return
							e.Check(ev.Wait(), "Wait on PutNB")
						})
					}
					one("PutNBI, EventDefer", func(a gex.Addr, src []byte) {
						e.Check(e.tm.PutNBI(r, a, src, gex.EventDefer, 0), w("PutNBI(EventDefer)"))
						e.Check(e.c.NBIWait(gex.ECPut, 0), "NBIWait(ECPut)")
						scribble(src) // locally complete at the latest with the operation
					})
					one("PutNB, EventDefer", func(a gex.Addr, src []byte) {
						ev, err := e.tm.PutNB(r, a, src, gex.EventDefer, 0)
						e.Check(err, w("PutNB(EventDefer)"))
						e.Check(ev.Wait(), "Wait on PutNB(EventDefer)")
						scribble(src)
					})
					one("PutNBI, EventGroup", func(a gex.Addr, src []byte) {
						e.Check(e.tm.PutNBI(r, a, src, gex.EventGroup, 0), w("PutNBI(EventGroup)"))
						e.Check(e.c.NBIWait(gex.ECLC, 0), "NBIWait(ECLC)")
						scribble(src) // local completion was synchronised through GEX_EC_LC
						e.Check(e.c.NBIWait(gex.ECPut, 0), "NBIWait(ECPut)")
					})
					one("PutNB, leaf event", func(a gex.Addr, src []byte) {
						lc := gex.EventNoOp // must be overwritten by the call
						ev, err := e.tm.PutNB(r, a, src, &lc, 0)
						e.Check(err, w("PutNB(&lc)"))
						e.Check(lc.Wait(), "Wait on the local-completion leaf")
						scribble(src)
						e.Check(ev.Wait(), "Wait on PutNB(&lc)")
					})
					// Refused lc_opt values initiate nothing.
					for _, c := range []struct {
						what string
						call func(a gex.Addr, src []byte) error
					}{
						{"PutNB with EventGroup", func(a gex.Addr, src []byte) error {
							_, err := e.tm.PutNB(r, a, src, gex.EventGroup, 0)
							return err
						}},
						{"PutNBI with a leaf *Event", func(a gex.Addr, src []byte) error {
							var lc gex.Event
							return e.tm.PutNBI(r, a, src, &lc, 0)
						}},
					} {
						off := z.take(e, n)
						expectRMAErr(e, w(c.what), c.call(base+gex.Addr(off), rmaCopy(1, n)), "lc_opt")
						done = append(done, put{c.what + " (refused)", off, make([]byte, n)})
					}
					e.Check(e.c.NBIWait(gex.ECAll, 0), "NBIWait(ECAll)")
					for _, p := range done {
						got := make([]byte, n)
						e.Check(e.tm.GetBlocking(got, r, base+gex.Addr(p.off), 0), "GetBlocking")
						wantBytes(e, fmt.Sprintf("%s of %d bytes to rank %d, read back", p.what, n, r), got, p.want)
					}
				}
			}
			e.Barrier()
		})
	})
}

// TestRMAImmediate: NOTE 1. With GEX_FLAG_IMMEDIATE a call either does its
// work or is a "no op": ErrNoOp (EventNoOp for NB), and then "no
// communication has been performed": nothing arrives at the target of a put
// and nothing is written to the destination of a get.
func TestRMAImmediate(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		const zone = 2 << 20
		conformance(t, 2, jobOpts{segSize: 2 * zone, supernode: sn}, func(e *rankEnv) {
			mine := e.seg.Bytes()
			clear(mine)
			// The last quarter of every zone holds the owner's data for the gets.
			for w := range uint64(e.size) {
				copy(mine[w*zone+3*zone/4:(w+1)*zone], rmaData(uint64(400+e.rank), zone/4))
			}
			e.Barrier()
			seed := uint64(1000 + 1000*e.rank)
			noops := 0
			for r := range e.size {
				base := rmaSeg(e, r).Owner + gex.Addr(uint64(e.rank)*zone)
				z := zoneAlloc{0, 3 * zone / 4}
				getSrc := base + 3*zone/4
				for _, n := range []int{1, 8, 4096, 70_000} {
					for _, f := range rmaFlavours {
						seed++
						off := z.take(e, n)
						a := base + gex.Addr(off)
						src := rmaData(seed, n)
						var err error
						var ev gex.Event
						switch f {
						case viaBlocking:
							err = e.tm.PutBlocking(r, a, src, gex.FlagImmediate)
						case viaNBI:
							err = e.tm.PutNBI(r, a, src, nil, gex.FlagImmediate)
						case viaNB:
							ev, err = e.tm.PutNB(r, a, src, nil, gex.FlagImmediate)
						}
						want := src
						if errors.Is(err, gex.ErrNoOp) {
							noops++
							want = make([]byte, n)
							if f == viaNB && ev != gex.EventNoOp {
								e.Fatalf("no-op PutNB returned %v, want EventNoOp", ev)
							}
						} else {
							e.Check(err, fmt.Sprintf("Put%v(IMMEDIATE) of %d bytes to rank %d", f, n, r))
							e.Check(ev.Wait(), "Wait on PutNB(IMMEDIATE)")
						}
						e.Check(e.c.NBIWait(gex.ECPut, 0), "NBIWait(ECPut)")
						got := make([]byte, n)
						e.Check(e.tm.GetBlocking(got, r, a, 0), "GetBlocking")
						wantBytes(e, fmt.Sprintf("Put%v(IMMEDIATE) of %d bytes to rank %d returning %v", f, n, r, err), got, want)

						dst := make([]byte, n)
						fill(dst, 0x5A)
						ev = gex.EventInvalid
						switch f {
						case viaBlocking:
							err = e.tm.GetBlocking(dst, r, getSrc, gex.FlagImmediate)
						case viaNBI:
							err = e.tm.GetNBI(dst, r, getSrc, gex.FlagImmediate)
						case viaNB:
							ev, err = e.tm.GetNB(dst, r, getSrc, gex.FlagImmediate)
						}
						want = rmaData(uint64(400+r), n)
						if errors.Is(err, gex.ErrNoOp) {
							noops++
							want = bytes.Repeat([]byte{0x5A}, n)
							if f == viaNB && ev != gex.EventNoOp {
								e.Fatalf("no-op GetNB returned %v, want EventNoOp", ev)
							}
						} else {
							e.Check(err, fmt.Sprintf("Get%v(IMMEDIATE) of %d bytes from rank %d", f, n, r))
							e.Check(ev.Wait(), "Wait on GetNB(IMMEDIATE)")
						}
						e.Check(e.c.NBIWait(gex.ECGet, 0), "NBIWait(ECGet)")
						wantBytes(e, fmt.Sprintf("Get%v(IMMEDIATE) of %d bytes from rank %d returning %v", f, n, r, err), dst, want)
					}
					if n <= 8 {
						seed++
						off := z.take(e, n)
						v := binary.LittleEndian.Uint64(rmaData(seed, 8))
						err := e.tm.PutBlockingVal(r, base+gex.Addr(off), v, n, gex.FlagImmediate)
						want := valImage(v, n)
						if errors.Is(err, gex.ErrNoOp) {
							noops++
							want = make([]byte, n)
						} else {
							e.Check(err, "PutBlockingVal(IMMEDIATE)")
						}
						got := make([]byte, n)
						e.Check(e.tm.GetBlocking(got, r, base+gex.Addr(off), 0), "GetBlocking")
						wantBytes(e, "PutBlockingVal(IMMEDIATE)", got, want)
						gv, err := e.tm.GetBlockingVal(r, getSrc, n, gex.FlagImmediate)
						if !errors.Is(err, gex.ErrNoOp) {
							e.Check(err, "GetBlockingVal(IMMEDIATE)")
							if w := valOf(rmaData(uint64(400+r), n)); gv != w {
								e.Fatalf("GetBlockingVal(IMMEDIATE) of %d bytes = %#x, want %#x", n, gv, w)
							}
						}
					}
				}
			}
			if !e.loop {
				e.Logf("%d no-op results (ranks are processes: backpressure depends on timing)", noops)
			}
			e.Barrier()
		})
	})
}

// TestRMAImmediateNoOp: the "no op" case made to happen. With the target
// parked in a handler (loop conduit, see parking) nothing it was sent is
// consumed, so immediate puts first exhaust the payload buffers for large
// chunks and then the ring: from then on every immediate put and get to it
// is a no op (NOTE 1: ErrNoOp, EventNoOp for NB), and after the release
// exactly the initiated puts have arrived and no no-op one has, and no
// no-op get wrote its destination. (gexgo's conduits have finite buffers and
// report exhausting them to immediate calls, as conduit.Immediate documents;
// "GEX_FLAG_IMMEDIATE ... *may* return without initiating", NOTE 1 says it
// does so only then.)
func TestRMAImmediateNoOp(t *testing.T) {
	p := newParking(1)
	const big, nBig, nVal = 1 << 16, 24, 2500
	const valBase = nBig * big
	loopJob(t, 2, jobOpts{segSize: valBase + 6*4096, supernode: 1}, func(e *rankEnv) {
		p.register(e)
		clear(e.seg.Bytes())
		e.Barrier()
		if e.rank != 0 {
			return
		}
		defer p.releaseAll()
		bs := rmaSeg(e, 1)
		p.park(e, 1, 0)
		isNoOp := func(what string, err error) bool {
			if errors.Is(err, gex.ErrNoOp) {
				return true
			}
			e.Check(err, what)
			return false
		}
		// Large chunks: pool buffers run out.
		bigDone := make([]bool, nBig)
		var nbEvs []gex.Event
		noops := 0
		for i := range nBig {
			a := bs.Owner + gex.Addr(i*big)
			src := rmaData(uint64(3000+i), big)
			var err error
			switch i % 2 {
			case 0:
				err = e.tm.PutNBI(1, a, src, nil, gex.FlagImmediate)
			case 1:
				var ev gex.Event
				ev, err = e.tm.PutNB(1, a, src, nil, gex.FlagImmediate)
				if err == nil {
					nbEvs = append(nbEvs, ev)
				} else if ev != gex.EventNoOp {
					e.Fatalf("PutNB(IMMEDIATE) returned %v with %v, want EventNoOp", ev, err)
				}
			}
			if isNoOp("immediate 64 KiB put", err) {
				noops++
				// Still exhausted (nothing consumes while the target is
				// parked): the blocking form is a no op too.
				if err := e.tm.PutBlocking(1, a, src, gex.FlagImmediate); !errors.Is(err, gex.ErrNoOp) {
					e.Fatalf("PutBlocking(IMMEDIATE) of 64 KiB with the buffers exhausted returned %v, want ErrNoOp", err)
				}
			} else {
				bigDone[i] = true
			}
		}
		if noops == 0 {
			e.Fatalf("%d immediate 64 KiB puts to a parked rank all initiated; the payload buffers are finite", nBig)
		}
		// Small puts: the ring runs out.
		valDone := make([]bool, nVal)
		noops = 0
		for i := range nVal {
			if isNoOp("immediate PutNBIVal", e.tm.PutNBIVal(1, bs.Owner+gex.Addr(valBase+8*i), uint64(i)+1, 8, gex.FlagImmediate)) {
				noops++
			} else {
				valDone[i] = true
			}
		}
		if noops == 0 {
			e.Fatalf("%d immediate 8-byte puts to a parked rank all initiated; the ring is finite", nVal)
		}
		// Ring messages take as many 64-byte slots as they need: a get
		// request (one slot) may still fit where a put of a value (two)
		// did not. Fill what is left with immediate gets.
		scratch := make([]byte, 8)
		for range nVal {
			if isNoOp("immediate GetNBI filling the ring", e.tm.GetNBI(scratch, 1, bs.Owner, gex.FlagImmediate)) {
				break
			}
		}
		// Now every immediate call to rank 1 is a no op.
		a := bs.Owner + gex.Addr(valBase+8*nVal)
		dst := make([]byte, 8)
		fill(dst, 0x5A)
		_, err := e.tm.GetBlockingVal(1, bs.Owner, 8, gex.FlagImmediate)
		for _, c := range []struct {
			what string
			err  error
		}{
			{"GetBlocking", e.tm.GetBlocking(dst, 1, bs.Owner, gex.FlagImmediate)},
			{"GetNBI", e.tm.GetNBI(dst, 1, bs.Owner, gex.FlagImmediate)},
			{"GetBlockingVal", err},
			{"PutBlocking", e.tm.PutBlocking(1, a, rmaData(1, 8), gex.FlagImmediate)},
			{"PutNBI", e.tm.PutNBI(1, a, rmaData(1, 8), nil, gex.FlagImmediate)},
			{"PutBlockingVal", e.tm.PutBlockingVal(1, a, 77, 8, gex.FlagImmediate)},
			{"PutNBIVal", e.tm.PutNBIVal(1, a, 77, 8, gex.FlagImmediate)},
		} {
			if !errors.Is(c.err, gex.ErrNoOp) {
				e.Fatalf("%s(IMMEDIATE) with the ring to the target full returned %v, want ErrNoOp", c.what, c.err)
			}
		}
		ev, err := e.tm.GetNB(dst, 1, bs.Owner, gex.FlagImmediate)
		if !errors.Is(err, gex.ErrNoOp) || ev != gex.EventNoOp {
			e.Fatalf("GetNB(IMMEDIATE) with the ring full returned (%v, %v), want (EventNoOp, ErrNoOp)", ev, err)
		}
		expectRMAErr(e, "Wait on EventNoOp", ev.Wait())
		ev, err = e.tm.PutNBVal(1, a, 77, 8, gex.FlagImmediate)
		if !errors.Is(err, gex.ErrNoOp) || ev != gex.EventNoOp {
			e.Fatalf("PutNBVal(IMMEDIATE) with the ring full returned (%v, %v), want (EventNoOp, ErrNoOp)", ev, err)
		}
		wantFilled(e, "destination of no-op gets", dst, 0x5A)

		p.release(0)
		e.Check(e.c.NBIWait(gex.ECAll, 0), "NBIWait(ECAll) after the release")
		e.Check(gex.EventWaitAll(nbEvs, 0), "EventWaitAll on the initiated PutNBs")
		got := make([]byte, big)
		for i := range nBig {
			e.Check(e.tm.GetBlocking(got, 1, bs.Owner+gex.Addr(i*big), 0), "GetBlocking")
			if bigDone[i] {
				wantBytes(e, fmt.Sprintf("initiated immediate put %d", i), got, rmaData(uint64(3000+i), big))
			} else {
				wantFilled(e, fmt.Sprintf("target of no-op immediate put %d", i), got, 0)
			}
		}
		vals := make([]byte, 8*nVal+8)
		e.Check(e.tm.GetBlocking(vals, 1, bs.Owner+gex.Addr(valBase), 0), "GetBlocking")
		for i := range nVal {
			want := valImage(uint64(i)+1, 8)
			if !valDone[i] {
				want = make([]byte, 8)
			}
			wantBytes(e, fmt.Sprintf("immediate PutNBIVal %d (initiated: %v)", i, valDone[i]), vals[8*i:8*i+8], want)
		}
		wantFilled(e, "target of the no-op puts after the ring filled", vals[8*nVal:], 0)
	})
}

// TestRMAFlags: NOTE 3 and NOTE 4 and the peer assertions of "Flags for
// point-to-point communication initiation".
//   - PEER_SEG_OFFSET: the remote address is an offset into the target's
//     bound segment (puts, gets, value forms).
//   - SELF_SEG_OFFSET: gexgo's local argument is a slice, which already names
//     its memory; the flag asserts that it lies in the caller's bound
//     segment, which is checked: accepted inside it, refused outside.
//   - PEER_NEVER_SELF / PEER_NEVER_NBRHD: a call that contradicts the
//     assertion is refused and writes nothing; one that keeps it works.
//   - flags that are not RMA flags are refused.
func TestRMAFlags(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		const zone = 1 << 20
		conformance(t, 3, jobOpts{segSize: 4 * zone, supernode: sn}, func(e *rankEnv) { rmaFlags(e, sn, zone) })
	})
}

func rmaFlags(e *rankEnv, sn int, zone uint64) {
	mine := e.seg.Bytes()
	clear(mine)
	// Zone 3 of every segment is the owner's staging area for SELF_SEG_OFFSET.
	stage := mine[3*zone : 4*zone]
	nbrhd, _ := e.c.QueryNbrhdInfo()
	inNbrhd := map[gex.Rank]bool{}
	for _, ri := range nbrhd {
		inNbrhd[ri.JobRank] = true
	}
	// The topology the two paths stand for: one neighbourhood, or each rank
	// alone in its own.
	if want := map[int]int{0: int(e.size), 1: 1}[sn]; len(nbrhd) != want {
		e.Fatalf("neighbourhood of %d ranks, want %d (GASNET_SUPERNODE_MAXSIZE=%d)", len(nbrhd), want, sn)
	}
	e.Barrier()
	seed := uint64(2000 + 1000*e.rank)
	for r := range e.size {
		bs := rmaSeg(e, r)
		myOff := uint64(e.rank) * zone // my zone in r's segment
		z := zoneAlloc{myOff, myOff + zone}
		check := func(what string, off uint64, want []byte) {
			got := make([]byte, len(want))
			e.Check(e.tm.GetBlocking(got, r, bs.Owner+gex.Addr(off), 0), "GetBlocking")
			wantBytes(e, fmt.Sprintf("%s to rank %d, read back", what, r), got, want)
		}
		for _, n := range []int{8, 5000, 70_000} {
			// PEER_SEG_OFFSET puts, each flavour; read back by address and
			// by offset.
			for _, f := range rmaFlavours {
				seed++
				off := z.take(e, n)
				putAll(e, f, []xfer{{r, gex.Addr(off), rmaData(seed, n)}}, gex.FlagPeerSegOffset)
				check(fmt.Sprintf("Put%v(PEER_SEG_OFFSET)", f), off, rmaData(seed, n))
				for _, g := range rmaFlavours {
					got := make([]byte, n)
					getAll(e, g, []xfer{{r, gex.Addr(off), got}}, gex.FlagPeerSegOffset)
					wantBytes(e, fmt.Sprintf("Get%v(PEER_SEG_OFFSET) from rank %d", g, r), got, rmaData(seed, n))
				}
			}
			// SELF_SEG_OFFSET: the local buffer inside my segment.
			seed++
			so := uint64(n) // somewhere in the staging zone, distinct per n
			local := stage[so : so+uint64(n)]
			copy(local, rmaData(seed, n))
			for _, f := range rmaFlavours {
				off := z.take(e, n)
				putAll(e, f, []xfer{{r, bs.Owner + gex.Addr(off), local}}, gex.FlagSelfSegOffset)
				check(fmt.Sprintf("Put%v(SELF_SEG_OFFSET) from the bound segment", f), off, rmaData(seed, n))
				dst := stage[zone/2 : zone/2+uint64(n)]
				clear(dst)
				getAll(e, f, []xfer{{r, bs.Owner + gex.Addr(off), dst}}, gex.FlagSelfSegOffset)
				wantBytes(e, fmt.Sprintf("Get%v(SELF_SEG_OFFSET) into the bound segment", f), dst, rmaData(seed, n))
			}
			// ... and outside it: refused, nothing written.
			heap := rmaCopy(seed, n)
			off := z.take(e, n)
			a := bs.Owner + gex.Addr(off)
			expectRMAErr(e, "PutBlocking(SELF_SEG_OFFSET) from outside the segment", e.tm.PutBlocking(r, a, heap, gex.FlagSelfSegOffset), "SELF_SEG_OFFSET")
			expectRMAErr(e, "PutNBI(SELF_SEG_OFFSET) from outside the segment", e.tm.PutNBI(r, a, heap, nil, gex.FlagSelfSegOffset), "SELF_SEG_OFFSET")
			_, err := e.tm.PutNB(r, a, heap, nil, gex.FlagSelfSegOffset)
			expectRMAErr(e, "PutNB(SELF_SEG_OFFSET) from outside the segment", err, "SELF_SEG_OFFSET")
			fill(heap, 0x5A)
			expectRMAErr(e, "GetBlocking(SELF_SEG_OFFSET) into memory outside the segment", e.tm.GetBlocking(heap, r, a, gex.FlagSelfSegOffset), "SELF_SEG_OFFSET")
			expectRMAErr(e, "GetNBI(SELF_SEG_OFFSET) into memory outside the segment", e.tm.GetNBI(heap, r, a, gex.FlagSelfSegOffset), "SELF_SEG_OFFSET")
			_, err = e.tm.GetNB(heap, r, a, gex.FlagSelfSegOffset)
			expectRMAErr(e, "GetNB(SELF_SEG_OFFSET) into memory outside the segment", err, "SELF_SEG_OFFSET")
			wantFilled(e, "destination of refused gets", heap, 0x5A)
			check("refused SELF_SEG_OFFSET puts", off, make([]byte, n))

			// PEER_NEVER_SELF and PEER_NEVER_NBRHD.
			for _, fl := range []gex.Flags{gex.FlagPeerNeverSelf, gex.FlagPeerNeverNbrhd} {
				refuse := fl == gex.FlagPeerNeverSelf && r == e.rank || fl == gex.FlagPeerNeverNbrhd && inNbrhd[r]
				for _, f := range rmaFlavours {
					seed++
					off := z.take(e, n)
					a := bs.Owner + gex.Addr(off)
					what := fmt.Sprintf("Put%v(%v) to rank %d", f, fl, r)
					if refuse {
						var err error
						switch f {
						case viaBlocking:
							err = e.tm.PutBlocking(r, a, rmaData(seed, n), fl)
						case viaNBI:
							err = e.tm.PutNBI(r, a, rmaData(seed, n), nil, fl)
						case viaNB:
							_, err = e.tm.PutNB(r, a, rmaData(seed, n), nil, fl)
						}
						expectRMAErr(e, what, err, fmt.Sprintf("rank %d", r))
						check(what+" (refused)", off, make([]byte, n))
						got := make([]byte, n)
						fill(got, 0x5A)
						switch f {
						case viaBlocking:
							err = e.tm.GetBlocking(got, r, a, fl)
						case viaNBI:
							err = e.tm.GetNBI(got, r, a, fl)
						case viaNB:
							_, err = e.tm.GetNB(got, r, a, fl)
						}
						expectRMAErr(e, fmt.Sprintf("Get%v(%v) from rank %d", f, fl, r), err, fmt.Sprintf("rank %d", r))
						wantFilled(e, "destination of a refused get", got, 0x5A)
						continue
					}
					putAll(e, f, []xfer{{r, a, rmaData(seed, n)}}, fl)
					check(what, off, rmaData(seed, n))
					got := make([]byte, n)
					getAll(e, f, []xfer{{r, a, got}}, fl)
					wantBytes(e, fmt.Sprintf("Get%v(%v) from rank %d", f, fl, r), got, rmaData(seed, n))
				}
			}
		}
		// Value forms with PEER_SEG_OFFSET.
		off := z.take(e, 8)
		v := uint64(0x0102030405060708) + uint64(e.rank)<<56 + uint64(r)<<48
		e.Check(e.tm.PutBlockingVal(r, gex.Addr(off), v, 8, gex.FlagPeerSegOffset), "PutBlockingVal(PEER_SEG_OFFSET)")
		got, err := e.tm.GetBlockingVal(r, gex.Addr(off), 8, gex.FlagPeerSegOffset)
		e.Check(err, "GetBlockingVal(PEER_SEG_OFFSET)")
		if got != v {
			e.Fatalf("GetBlockingVal(PEER_SEG_OFFSET) from rank %d = %#x, want %#x", r, got, v)
		}
		check("PutBlockingVal(PEER_SEG_OFFSET)", off, valImage(v, 8))
		// Flags that are not RMA flags.
		for _, fl := range []gex.Flags{gex.FlagAMShort, gex.FlagADMyRank, gex.FlagRankIsJobrank, 1 << 62} {
			rmaRefusedAll(e, "with a non-RMA flag", r, bs.Owner+gex.Addr(z.take(e, 8)), 8, fl, "flags")
		}
	}
	e.Check(e.c.NBITest(gex.ECAll, 0), "NBITest(ECAll)")
	e.Barrier()
}
