package gex_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// TestRMARandomModel: 4 ranks each run a long deterministic random sequence
// of puts and gets (random flavour, size 1 B .. 20 KiB, many crossing 4 KiB
// and 64 KiB boundaries, random target including itself), with NBI and NB
// operations left in flight in batches (some inside access regions) and
// synchronised in random ways. Rank w writes only zone w of every target
// segment, so writers never conflict and each rank knows the contents of its
// zones exactly: every get is checked against the rank's model. In flight at
// once are only operations on disjoint ranges: GASNet-1 §3.3.1 leaves the
// order of unsynchronised operations unspecified, so a batch is synchronised
// before an operation that overlaps one of its ranges.
//
// At the end every rank checks every byte of its own segment against the
// state rebuilt by replaying every rank's sequence (the operations are drawn
// from a generator seeded by the rank; the synchronisation choices come from
// a second generator that the replay does not need).
func TestRMARandomModel(t *testing.T) {
	forPaths(t, func(t *testing.T, sn int) {
		conformance(t, modelRanks, jobOpts{segSize: modelRanks * modelZone, supernode: sn}, rmaModel)
	})
}

const (
	modelRanks = 4
	modelZone  = 192 << 10 // crosses the 64 KiB boundaries at 64 and 128 KiB
	modelMaxN  = 20 << 10
	modelBatch = 24 // most operations in flight at once
)

// modelOps is the number of operations per rank: goroutine ranks (under
// -race) are slower than processes; the property is the same.
func modelOps(loop bool) int {
	if loop {
		return 3000
	}
	return 10000
}

// Operation kinds.
const (
	mPut    = iota // flavour from rmaFlavour
	mGet           // flavour from rmaFlavour
	mPutVal        // flavour: 0 PutBlockingVal, 1 PutNBIVal, 2 PutNBVal
	mGetVal        // GetBlockingVal
)

type modelOp struct {
	kind   int
	flav   rmaFlavour
	target gex.Rank
	off    int // in the initiator's zone of the target
	n      int
	seed   uint64 // the put's data window; the value of a value put
}

func (o modelOp) String() string {
	k := [...]string{"Put", "Get", "PutVal", "GetVal"}[o.kind]
	return fmt.Sprintf("%s%v to rank %d, zone offset %d, %d bytes", k, o.flav, o.target, o.off, o.n)
}

func modelRNG(rank gex.Rank, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(0x6765786d6f64656c+uint64(rank), stream))
}

// drawOp draws the next operation of a rank's sequence. It is the only
// consumer of the operations generator, in the run and in the replay.
func drawOp(rng *rand.Rand, size gex.Rank) modelOp {
	var o modelOp
	o.target = gex.Rank(rng.IntN(int(size)))
	switch k := rng.IntN(8); {
	case k < 3:
		o.n = 1 + rng.IntN(8)
	case k < 5:
		o.n = 9 + rng.IntN(4096)
	default:
		o.n = 4097 + rng.IntN(modelMaxN-4096)
	}
	switch k := rng.IntN(8); {
	case k == 0: // across a 64 KiB boundary of the segment
		b := []int{64 << 10, 128 << 10}[rng.IntN(2)]
		o.off = b - 1 - rng.IntN(o.n)
	case k <= 2: // across a page boundary
		o.off = 4096*(1+rng.IntN(modelZone/4096-6)) - 1 - rng.IntN(o.n)
	default:
		o.off = rng.IntN(modelZone - o.n + 1)
	}
	o.off = max(0, min(o.off, modelZone-o.n))
	put := rng.IntN(100) < 55
	val := o.n <= 8 && rng.IntN(2) == 0
	switch {
	case put && val:
		o.kind, o.flav = mPutVal, rmaFlavour(rng.IntN(3))
	case put:
		o.kind, o.flav = mPut, rmaFlavour(rng.IntN(3))
	case val:
		o.kind = mGetVal
	default:
		o.kind, o.flav = mGet, rmaFlavour(rng.IntN(3))
	}
	o.seed = rng.Uint64()
	return o
}

// payload is the bytes a put operation writes.
func (o modelOp) payload() []byte {
	if o.kind == mPutVal {
		return valImage(o.seed, o.n)
	}
	return rmaData(o.seed%rmaWindows, o.n)
}

func (o modelOp) isPut() bool { return o.kind == mPut || o.kind == mPutVal }

// modelRun is one rank's state during the run.
type modelRun struct {
	e      *rankEnv
	bases  []gex.Addr
	model  [][]byte // model[t]: my zone at target t
	sync   *rand.Rand
	region bool // an access region is open for the current batch
	evs    []gex.Event
	flight []modelFlight
	arena  []byte
	used   int
	stats  struct{ ops, batches, regions, gets int }
}

type modelFlight struct {
	op  modelOp
	dst []byte // a get's destination, checked at the flush
}

func (m *modelRun) addr(o modelOp) gex.Addr {
	return m.bases[o.target] + gex.Addr(uint64(m.e.rank)*modelZone+uint64(o.off))
}

// conflicts reports whether o overlaps an operation in flight.
func (m *modelRun) conflicts(o modelOp) bool {
	for _, f := range m.flight {
		if f.op.target == o.target && f.op.off < o.off+o.n && o.off < f.op.off+f.op.n {
			return true
		}
	}
	return false
}

// flush synchronises everything in flight, choosing how at random, and
// checks the gets.
func (m *modelRun) flush() {
	e := m.e
	if m.region {
		ev, err := e.c.NBIEndAccessRegion(0)
		e.Check(err, "NBIEndAccessRegion")
		m.evs = append(m.evs, ev)
		m.region = false
	}
	switch m.sync.IntN(3) {
	case 0:
		e.Check(e.c.NBIWait(gex.ECAll, 0), "NBIWait(ECAll)")
	case 1:
		e.Check(e.c.NBIWait(gex.ECPut, 0), "NBIWait(ECPut)")
		e.Check(e.c.NBIWait(gex.ECGet, 0), "NBIWait(ECGet)")
	case 2:
		for {
			err := e.c.NBITest(gex.ECAll, 0)
			if err == nil {
				break
			}
			if !errors.Is(err, gex.ErrNotReady) {
				e.Fatalf("NBITest(ECAll): %v", err)
			}
			e.Check(e.c.Poll(), "Poll")
		}
	}
	switch m.sync.IntN(4) {
	case 0:
		e.Check(gex.EventWaitAll(m.evs, 0), "EventWaitAll")
	case 1:
		for i, ev := range m.evs {
			e.Check(ev.Wait(), fmt.Sprintf("Wait on event %d", i))
			m.evs[i] = gex.EventInvalid
		}
	case 2:
		for {
			e.Check(gex.EventWaitSome(m.evs, 0), "EventWaitSome")
			if gex.EventTestAll(m.evs, 0) == nil {
				break
			}
		}
	case 3:
		for {
			err := gex.EventTestAll(m.evs, 0)
			if err == nil {
				break
			}
			if !errors.Is(err, gex.ErrNotReady) {
				e.Fatalf("EventTestAll: %v", err)
			}
			e.Check(e.c.Poll(), "Poll")
		}
	}
	for i, ev := range m.evs {
		if ev != gex.EventInvalid {
			e.Fatalf("event %d not overwritten with EventInvalid after its synchronisation", i)
		}
	}
	for _, f := range m.flight {
		if f.op.kind == mGet {
			m.checkGet(f.op, f.dst)
		}
	}
	m.evs, m.flight, m.used = m.evs[:0], m.flight[:0], 0
	m.stats.batches++
}

func (m *modelRun) checkGet(o modelOp, got []byte) {
	m.e.t.Helper()
	m.stats.gets++
	wantBytes(m.e, fmt.Sprintf("op %d: %v, checked against the model", m.stats.ops, o), got, m.model[o.target][o.off:o.off+o.n])
}

// do runs one operation.
func (m *modelRun) do(o modelOp) {
	e := m.e
	if m.conflicts(o) || len(m.flight) >= modelBatch || o.kind == mGet && m.used+o.n > len(m.arena) {
		m.flush()
	}
	if !m.region && len(m.flight) == 0 && m.sync.IntN(5) == 0 {
		e.Check(e.c.NBIBeginAccessRegion(0), "NBIBeginAccessRegion")
		m.region = true
		m.stats.regions++
	}
	m.stats.ops++
	a := m.addr(o)
	what := fmt.Sprintf("op %d: %v", m.stats.ops, o)
	var ev gex.Event
	var err error
	switch o.kind {
	case mPut:
		src := o.payload()
		switch o.flav {
		case viaBlocking:
			err = e.tm.PutBlocking(o.target, a, src, 0)
		case viaNBI:
			err = e.tm.PutNBI(o.target, a, src, nil, 0)
		case viaNB:
			ev, err = e.tm.PutNB(o.target, a, src, nil, 0)
		}
	case mPutVal:
		switch o.flav {
		case viaBlocking:
			err = e.tm.PutBlockingVal(o.target, a, o.seed, o.n, 0)
		case viaNBI:
			err = e.tm.PutNBIVal(o.target, a, o.seed, o.n, 0)
		case viaNB:
			ev, err = e.tm.PutNBVal(o.target, a, o.seed, o.n, 0)
		}
	case mGet:
		dst := m.arena[m.used : m.used+o.n : m.used+o.n]
		m.used += o.n
		switch o.flav {
		case viaBlocking:
			err = e.tm.GetBlocking(dst, o.target, a, 0)
		case viaNBI:
			err = e.tm.GetNBI(dst, o.target, a, 0)
		case viaNB:
			ev, err = e.tm.GetNB(dst, o.target, a, 0)
		}
		if err == nil && o.flav == viaBlocking {
			m.checkGet(o, dst)
		} else {
			m.flight = append(m.flight, modelFlight{o, dst})
		}
	case mGetVal:
		var v uint64
		v, err = e.tm.GetBlockingVal(o.target, a, o.n, 0)
		if err == nil {
			if want := valOf(m.model[o.target][o.off : o.off+o.n]); v != want {
				e.Fatalf("%s: GetBlockingVal = %#x, model says %#x", what, v, want)
			}
			m.stats.gets++
		}
	}
	e.Check(err, what)
	if o.isPut() {
		copy(m.model[o.target][o.off:], o.payload())
		if o.flav != viaBlocking {
			m.flight = append(m.flight, modelFlight{op: o})
		}
	}
	if ev != gex.EventInvalid {
		m.evs = append(m.evs, ev)
	}
}

func rmaModel(e *rankEnv) {
	mine := e.seg.Bytes()
	clear(mine)
	m := &modelRun{e: e, sync: modelRNG(e.rank, 2), arena: make([]byte, 256<<10)}
	for r := range e.size {
		m.bases = append(m.bases, rmaSeg(e, r).Owner)
		m.model = append(m.model, make([]byte, modelZone))
	}
	e.Barrier() // every segment is clear
	ops := modelRNG(e.rank, 1)
	for range modelOps(e.loop) {
		m.do(drawOp(ops, e.size))
	}
	m.flush()
	e.Barrier() // every rank's operations are complete

	// Rebuild this segment from every rank's sequence.
	want := make([]byte, len(mine))
	puts := 0
	for w := range e.size {
		rng := modelRNG(w, 1)
		zone := want[uint64(w)*modelZone : uint64(w+1)*modelZone]
		for range modelOps(e.loop) {
			o := drawOp(rng, e.size)
			if o.isPut() && o.target == e.rank {
				copy(zone[o.off:], o.payload())
				puts++
			}
		}
	}
	if i := firstDiff(mine, want); i >= 0 {
		e.Fatalf("segment byte %d (zone of rank %d, offset %d) is %#x, the replay says %#x", i, i/modelZone, i%modelZone, mine[i], want[i])
	}
	// My own model of my zones must agree with the replay too.
	for r := range e.size {
		b := make([]byte, modelZone)
		e.Check(e.tm.GetBlocking(b, r, m.bases[r]+gex.Addr(uint64(e.rank)*modelZone), 0), "GetBlocking of the whole zone")
		wantBytes(e, fmt.Sprintf("my zone at rank %d after the run", r), b, m.model[r])
	}
	e.Logf("rank 0: %d operations (%d gets checked) in %d batches, %d batches in access regions; %d puts replayed into its segment",
		m.stats.ops, m.stats.gets, m.stats.batches, m.stats.regions, puts)
	e.Barrier()
}
