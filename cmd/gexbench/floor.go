package main

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/shm"
	"golang.org/x/sys/unix"
)

// The floors: what the hardware does between ranks 0 and 1 through shared
// memory with no gexgo call in the loop, measured in the same run as the
// figures they bound (gexbench am, barrier, floor).
//
//   - cache-line ping-pong: rank 0 stores an odd value in a word of its
//     segment, rank 1 (which maps that segment) answers with the value + 1,
//     rank 0 waits for it: one round trip of a cache line, the floor under
//     an AM round trip.
//   - two-line ping-pong: rank 0 stores a value in line A, rank 1 waits
//     for it and stores it in line B, rank 0 waits for B: what an AM round
//     trip through two queues moves (the request and its reply are written
//     by different ranks into different lines: each direction is a line
//     written here and read there).
//   - one-line ping-pong: the pattern of an AM round trip through a duo
//     line (internal/conduit/smp/duo.go): one line holding one message at
//     a time, rank 0 writes a data word and an odd value into its word,
//     rank 1 writes its reply (a data word, the value + 1) over it; the
//     line moves as in the one-word ping-pong.
//   - process switch round trip: ranks 0 and 1 pin themselves to CPU 0 for
//     a moment and hand a word back and forth, each calling sched_yield(2)
//     while it waits, so that every hand-off is a switch from one process
//     to the other on that CPU: the floor under a barrier of more ranks
//     than CPUs (each rank must run once per barrier, so each CPU switches
//     processes at least once per barrier: half a round trip).
//   - flag barrier: ranks 0 and 1 each store the barrier's number in their
//     own line and wait until the other's line holds it: the floor under a
//     2-rank barrier.
//   - one-way ring flood: rank 0 writes messages into a ring of 256
//     64-byte slots in its segment (the message's number into the slot's
//     word, a release store), rank 1 waits for each one and stores its
//     position in a line of its own every 32 messages, and rank 0 writes a
//     slot only once rank 1 has passed it: one line per message from
//     producer to consumer, the floor under the AM one-way flood (a time
//     per message; its inverse is the rate).
//   - copy (64 KiB and 1 MiB): rank 0 alone copies n bytes between two
//     buffers in its heap with copy(), over and over, in pieces of at most
//     256 KiB (both buffers stay in its caches): the machine's memcpy
//     speed, which sets the bulk rows (the Medium and Long payload copies,
//     the 1 MiB broadcast) and tells this machine from the reference one
//     (../shared/notes/perf-anchors.md: memcpy of 1 MiB at 45 GB/s there).
//     The pieces are the library's (gex's copyMapped): Go's memmove
//     switches to non-temporal stores from 1 MiB, which write the bytes to
//     memory at about 27 GB/s here where glibc's memcpy of 1 MiB, and
//     copy() of 256 KiB pieces, stay in the cache at 42-48 GB/s (docs/am.md,
//     "A copy floor beside the bulk rows"). Rank 1 meanwhile waits for
//     the ping-pong, on its own CPU.
//   - copy echo (4 KiB and 64 KiB): rank 0 copies n bytes from a buffer in
//     its heap into buffer A in shared memory and stores an odd value in a
//     word, rank 1 copies A into a second shared buffer B and answers with
//     the value + 1: the AM Medium echo (payload into the sender's pool
//     buffer, the handler's reply copies it into its own) with plain copy()
//     and a flag in place of the conduit, the floor beside the Medium rows.
//
// All spin with plain sync/atomic loads and stores (yielding the CPU only
// after a long wait, so that a loaded machine cannot starve the peer). The
// waits are written out in each loop: a shared helper does not inline (its
// yield call puts it over the inliner's budget, cost 82 of 80, even with
// the yield out of line), and a call per round trip would add to the floors.

// Offsets of the floors' words in rank 0's segment (own cache lines).
const (
	floorPing   = 0
	floorFlag0  = 64
	floorFlag1  = 128
	floorEcho   = 192 // the copy echo's words, one line per size
	floorTwoA   = floorEcho + 64*len(echoSizes)
	floorTwoB   = floorTwoA + 64
	floorYield  = floorTwoB + 64   // the process switch round trip's word
	floorPinned = floorYield + 64  // rank 1's pinning: 1 done, 2 refused
	floorLine   = floorPinned + 64 // the one-line ping-pong's line: its word at +0, data at +8
	floorBytes  = floorLine + 64
	floorStop   = ^uint64(0) // ping or echo word: rank 1 stops answering
	floorIters  = 200000
	// The copy echo's buffers A and B, each echoSizes' largest, from
	// floorBufA on (page aligned, as the pool's buffers are line aligned).
	floorBufA    = 4096
	floorEchoMax = 64 << 10
	// The ring flood's slots, then rank 1's position line.
	floorRing        = floorBufA + 2*floorEchoMax
	floorRingSlots   = 256
	floorRingPublish = 32 // rank 1 stores its position every this many messages
	floorRingHead    = floorRing + floorRingSlots*64
	floorRingStop    = floorRingHead + 64
	floorSegBytes    = floorRingStop + 64
)

// echoSizes are the copy echo's sizes: the Medium rows issue 15 compares.
var echoSizes = [...]int{4 << 10, floorEchoMax}

// copySizes are the one-rank copy's sizes: the largest Medium payload and
// the broadcast issue 15 compares. copyFloorBytes is what each copies in
// all (at least copyFloorMin copies), in pieces of at most copyFloorPiece
// bytes (below memmove's non-temporal switch, as gex copies).
var copySizes = [...]int{floorEchoMax, 1 << 20}

const (
	copyFloorBytes = 256 << 20
	copyFloorMin   = 100
	copyFloorPiece = 256 << 10
)

// floorStats are the floors of one run; ok is false where ranks 0 and 1 do
// not share memory (why says so).
type floorStats struct {
	ping, flag latStats
	two        latStats // two-line ping-pong
	line       latStats // one-line ping-pong (the duo line's pattern)
	flood      latStats // one-way ring flood, per message
	yield      latStats // process switch round trip on one CPU
	pinned     bool     // both ranks ran the switch round trip on CPU 0
	echo       [len(echoSizes)]latStats
	copy       [len(copySizes)]latStats // rank 0's alone; zero on rank 1
	ok         bool
	why        string
}

// floorsFor reports whether the benchmark prints floors.
func (cfg *config) floorsFor() bool {
	return cfg.bench == "am" || cfg.bench == "barrier" || cfg.bench == "floor"
}

// runFloors measures the floors on ranks 0 and 1; the other ranks only take
// part in the barriers. barrier is gexbench's AM barrier over all ranks.
// Rank 0's figures are returned (rank 1 measures the same loop).
func runFloors(cfg *config, tm *gex.TM, seg *gex.Segment, barrier func() error) (*floorStats, error) {
	me := tm.QueryRank()
	fs := &floorStats{}
	var mem []byte
	switch me {
	case 0:
		peer, _, err := tm.QueryBoundSegmentNB(1, gex.FlagImmediate)
		if err != nil {
			return nil, err
		}
		if peer.Local != nil && len(seg.Bytes()) >= floorSegBytes {
			mem = seg.Bytes()
			clear(mem[:floorBytes])
			clear(mem[floorRing:floorSegBytes]) // the ring flood's words, rank 1's position, the stop word
		}
	case 1:
		bs, ev, err := tm.QueryBoundSegmentNB(0, 0)
		if err == nil {
			err = ev.Wait()
		}
		if err != nil {
			return nil, err
		}
		if len(bs.Local) >= floorSegBytes {
			mem = bs.Local
		}
	}
	// The mapping relation is symmetric: ranks 0 and 1 agree on mem != nil.
	if err := barrier(); err != nil {
		return nil, err
	}
	if me > 1 {
		return fs, barrier()
	}
	if mem == nil {
		fs.why = "rank 1's segment is not mapped into rank 0 (other neighbourhood or host): no shared-memory floor"
		return fs, barrier()
	}
	iters := floorIters
	if cfg.iters > 0 {
		iters = cfg.iters
	}
	ping := shm.Uint64At(mem, floorPing)
	var err error
	if me == 0 {
		if fs.copy, err = copyFloor(cfg.batches); err != nil {
			return nil, err
		}
		v := uint64(1)
		fs.ping, err = timeBatches(iters, cfg.batches, func(n int) error {
			for range n {
				ping.Store(v)
				for spins := 0; ping.Load() != v+1; spins++ {
					if spins > 1<<16 {
						runtime.Gosched()
						spins = 0
					}
				}
				v += 2
			}
			return nil
		})
		ping.Store(floorStop)
	} else {
		answerPings(ping, nil)
	}
	if err != nil {
		return nil, err
	}
	if fs.line, err = oneLine(iters, cfg.batches, mem, me); err != nil {
		return nil, err
	}
	if fs.two, err = twoLines(iters, cfg.batches, mem, me); err != nil {
		return nil, err
	}
	if fs.flood, err = ringFlood(iters, cfg.batches, mem, me); err != nil {
		return nil, err
	}
	if err := copyEcho(cfg, fs, mem, me); err != nil {
		return nil, err
	}
	if fs.yield, fs.pinned, err = switchRoundTrip(cfg, mem, me); err != nil {
		return nil, err
	}
	own, other := shm.Uint64At(mem, floorFlag0), shm.Uint64At(mem, floorFlag1)
	if me == 1 {
		own, other = other, own
	}
	k := uint64(0)
	fs.flag, err = timeBatches(iters, cfg.batches, func(n int) error {
		for range n {
			k++
			own.Store(k)
			for spins := 0; other.Load() < k; spins++ {
				if spins > 1<<16 {
					runtime.Gosched()
					spins = 0
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	fs.ok = true
	if err := barrier(); err != nil {
		return nil, err
	}
	if me == 0 {
		fillPattern(mem[:floorSegBytes], 0) // the segment as the other benchmarks expect it
	}
	return fs, nil
}

// copyFloor times copy() of each of copySizes between two buffers of this
// rank's heap, in pieces of at most copyFloorPiece bytes (rank 0's; rank 1
// is waiting for the ping-pong meanwhile).
func copyFloor(batches int) ([len(copySizes)]latStats, error) {
	var st [len(copySizes)]latStats
	for k, n := range copySizes {
		src, dst := make([]byte, n), make([]byte, n)
		fillPattern(src, 0)
		var err error
		if st[k], err = timeBatches(max(copyFloorMin, copyFloorBytes/n), batches, func(i int) error {
			for range i {
				for o := 0; o < n; o += copyFloorPiece {
					e := min(o+copyFloorPiece, n)
					copy(dst[o:e], src[o:e])
				}
			}
			return nil
		}); err != nil {
			return st, err
		}
		if !bytes.Equal(dst, src) {
			return st, fmt.Errorf("copy floor: the %d-byte copy does not match its source", n)
		}
	}
	return st, nil
}

// twoLines measures the two-line ping-pong (rank 0 times it, rank 1
// answers): rank 0 writes only line A, rank 1 only line B.
func twoLines(iters, batches int, mem []byte, me gex.Rank) (latStats, error) {
	a, b := shm.Uint64At(mem, floorTwoA), shm.Uint64At(mem, floorTwoB)
	if me == 1 {
		last := uint64(0)
		for spins := 0; ; spins++ {
			v := a.Load()
			if v == floorStop {
				return latStats{}, nil
			}
			if v != last {
				b.Store(v)
				last, spins = v, 0
			}
			if spins > 1<<16 {
				runtime.Gosched()
				spins = 0
			}
		}
	}
	v := uint64(0)
	st, err := timeBatches(iters, batches, func(n int) error {
		for range n {
			v++
			a.Store(v)
			for spins := 0; b.Load() != v; spins++ {
				if spins > 1<<16 {
					runtime.Gosched()
					spins = 0
				}
			}
		}
		return nil
	})
	a.Store(floorStop)
	return st, err
}

// oneLine measures the one-line ping-pong (rank 0 times it, rank 1
// answers), the pattern of an AM round trip through a duo line
// (internal/conduit/smp/duo.go): rank 0 stores a data word and then an
// odd value in the line's word, rank 1 waits for it and writes its reply
// over it (a data word, then the value + 1), rank 0 waits for that. Each
// store is a release store, as the conduit's.
func oneLine(iters, batches int, mem []byte, me gex.Rank) (latStats, error) {
	word, data := shm.Uint64At(mem, floorLine), shm.Uint64At(mem, floorLine+8)
	if me == 1 {
		for spins := 0; ; spins++ {
			v := word.Load()
			if v == floorStop {
				return latStats{}, nil
			}
			if v&1 == 1 { // a request: the reply over it
				shm.StoreRelease64(data, v)
				shm.StoreRelease64(word, v+1)
				spins = 0
			}
			if spins > 1<<16 {
				runtime.Gosched()
				spins = 0
			}
		}
	}
	v := uint64(1)
	st, err := timeBatches(iters, batches, func(n int) error {
		for range n {
			shm.StoreRelease64(data, v)
			shm.StoreRelease64(word, v)
			for spins := 0; word.Load() != v+1; spins++ {
				if spins > 1<<16 {
					runtime.Gosched()
					spins = 0
				}
			}
			v += 2
		}
		return nil
	})
	word.Store(floorStop)
	return st, err
}

// ringFlood measures the one-way ring flood (rank 0 produces and times
// it, rank 1 consumes): message i is its number stored (a release store)
// into the word of slot i mod floorRingSlots, which rank 0 writes only
// once rank 1's published position shows the slot's previous message
// read. The loops touch nothing else per message. After the timed
// messages rank 0 sets the stop word, which rank 1 reads only once it has
// waited a while for a message.
func ringFlood(iters, batches int, mem []byte, me gex.Rank) (latStats, error) {
	var words [floorRingSlots]*atomic.Uint64
	for k := range words {
		words[k] = shm.Uint64At(mem, floorRing+64*k)
	}
	head, stop := shm.Uint64At(mem, floorRingHead), shm.Uint64At(mem, floorRingStop)
	if me == 1 {
		for i := uint64(1); ; i++ {
			w := words[i%floorRingSlots]
			for spins := 0; w.Load() != i; spins++ {
				if spins > 1<<10 && stop.Load() == floorStop {
					return latStats{}, nil
				}
				if spins > 1<<16 {
					runtime.Gosched()
					spins = 0
				}
			}
			if i%floorRingPublish == 0 {
				shm.StoreRelease64(head, i)
			}
		}
	}
	i, seen := uint64(0), uint64(0)
	st, err := timeBatches(iters, batches, func(n int) error {
		for range n {
			i++
			for spins := 0; i >= seen+floorRingSlots; spins++ {
				if seen = head.Load(); spins > 1<<16 {
					runtime.Gosched()
					spins = 0
				}
			}
			shm.StoreRelease64(words[i%floorRingSlots], i)
		}
		return nil
	})
	stop.Store(floorStop)
	return st, err
}

// switchRoundTrip measures the process switch round trip (rank 0 times it,
// rank 1 answers) with both ranks' threads pinned to CPU 0, and reports
// whether both could pin (if not, the figure is not a switch on one CPU).
// The threads get their CPU sets back afterwards.
func switchRoundTrip(cfg *config, mem []byte, me gex.Rank) (latStats, bool, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, cpu0 unix.CPUSet
	cpu0.Set(0)
	pinned := unix.SchedGetaffinity(0, &old) == nil && unix.SchedSetaffinity(0, &cpu0) == nil
	if pinned {
		defer unix.SchedSetaffinity(0, &old)
	}
	w, peerPinned := shm.Uint64At(mem, floorYield), shm.Uint64At(mem, floorPinned)
	yield := func() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
	if me == 1 {
		if pinned {
			peerPinned.Store(1)
		} else {
			peerPinned.Store(2)
		}
		last := uint64(0)
		for {
			v := w.Load()
			if v == floorStop {
				return latStats{}, false, nil
			}
			if v&1 == 1 && v != last {
				w.Store(v + 1)
				last = v
			}
			yield()
		}
	}
	for peerPinned.Load() == 0 {
		yield()
	}
	v := uint64(1)
	st, err := timeBatches(max(100, floorItersOf(cfg)/20), cfg.batches, func(n int) error {
		for range n {
			w.Store(v)
			for w.Load() != v+1 {
				yield()
			}
			v += 2
		}
		return nil
	})
	w.Store(floorStop)
	return st, pinned && peerPinned.Load() == 1, err
}

// copyEcho measures the copy echo of each of echoSizes (rank 0 times, rank 1
// answers), each size on its own word so that no word is reset while the
// peer may still read it.
func copyEcho(cfg *config, fs *floorStats, mem []byte, me gex.Rank) error {
	a := mem[floorBufA : floorBufA+floorEchoMax]
	b := mem[floorBufA+floorEchoMax : floorBufA+2*floorEchoMax]
	var src []byte
	if me == 0 {
		src = make([]byte, floorEchoMax) // the payload in rank 0's heap
		fillPattern(src, 0)
	}
	for k, n := range echoSizes {
		w := shm.Uint64At(mem, floorEcho+64*k)
		if me == 1 {
			answerPings(w, func() { copy(b[:n], a[:n]) })
			continue
		}
		v := uint64(1)
		var err error
		fs.echo[k], err = timeBatches(echoIters(cfg, n), cfg.batches, func(cnt int) error {
			for range cnt {
				copy(a[:n], src[:n])
				w.Store(v)
				for spins := 0; w.Load() != v+1; spins++ {
					if spins > 1<<16 {
						runtime.Gosched()
						spins = 0
					}
				}
				v += 2
			}
			return nil
		})
		w.Store(floorStop)
		if err != nil {
			return err
		}
		// Rank 1 answered the last echo after copying: B holds the payload.
		if !bytes.Equal(b[:n], src[:n]) {
			return fmt.Errorf("copy echo of %d bytes: buffer B does not hold the payload", n)
		}
	}
	return nil
}

// echoIters is the copy echo's operation count for n bytes: the floors'
// count up to 8 KiB, then fewer in proportion to the size (as sizeIters).
func echoIters(cfg *config, n int) int {
	it := floorItersOf(cfg)
	if n <= 8<<10 {
		return it
	}
	return max(100, int(int64(it)*(8<<10)/int64(n)))
}

// answerPings is rank 1's side of the ping-pong and the copy echo: every new
// odd value is answered with the value + 1, after calling work (if not nil),
// until floorStop.
func answerPings(ping *atomic.Uint64, work func()) {
	last := uint64(0)
	for spins := 0; ; spins++ {
		v := ping.Load()
		if v == floorStop {
			return
		}
		if v&1 == 1 && v != last {
			if work != nil {
				work()
			}
			ping.Store(v + 1)
			last, spins = v, 0
		}
		if spins > 1<<16 {
			runtime.Gosched()
			spins = 0
		}
	}
}

// rows adds the floors to res: the table lines and the CSV rows
// floor-pingpong, floor-twoline, floor-oneline, floor-ringflood,
// floor-flagbarrier, floor-copyecho, floor-copy (path local) and,
// where both ranks could pin to CPU 0, floor-switch (path shm).
func (fs *floorStats) rows(res *results) {
	if fs == nil {
		return
	}
	if !fs.ok {
		fmt.Fprintf(&res.table, "floor: %s\n", fs.why)
		return
	}
	fmt.Fprintf(&res.table, "floors in the same run (ranks 0 and 1, shared memory, plain atomics, no gexgo call in the loop):\n")
	fmt.Fprintf(&res.table, "%-44s %10s %8s %12s %12s %12s\n", "  cache-line ping-pong round trip", "8 B", "", durName(fs.ping.avg), durName(fs.ping.median), durName(fs.ping.min))
	fmt.Fprintf(&res.table, "%-44s %10s %8s %12s %12s %12s\n", "  two-line ping-pong round trip", "8 B", "", durName(fs.two.avg), durName(fs.two.median), durName(fs.two.min))
	fmt.Fprintf(&res.table, "%-44s %10s %8s %12s %12s %12s\n", "  one-line ping-pong round trip (duo line)", "8 B", "", durName(fs.line.avg), durName(fs.line.median), durName(fs.line.min))
	fmt.Fprintf(&res.table, "%-44s %10s %8s %12s %12s %12s\n", "  one-way ring flood (per message)", "8 B", "", durName(fs.flood.avg), durName(fs.flood.median), durName(fs.flood.min))
	name := "  process switch round trip (one CPU)"
	if !fs.pinned {
		name = "  yield round trip (could not pin to CPU 0)"
	}
	fmt.Fprintf(&res.table, "%-44s %10s %8s %12s %12s %12s\n", name, "0 B", "", durName(fs.yield.avg), durName(fs.yield.median), durName(fs.yield.min))
	fmt.Fprintf(&res.table, "%-44s %10s %8s %12s %12s %12s\n", "  two-process flag barrier", "0 B", "", durName(fs.flag.avg), durName(fs.flag.median), durName(fs.flag.min))
	for k, n := range echoSizes {
		fmt.Fprintf(&res.table, "%-44s %10s %8s %12s %12s %12s\n", "  copy echo round trip (copy(), heap->A->B)", sizeName(n), "", durName(fs.echo[k].avg), durName(fs.echo[k].median), durName(fs.echo[k].min))
	}
	for k, n := range copySizes {
		fmt.Fprintf(&res.table, "%-44s %10s %8s %12s %12s %12s  (median %.1f GB/s)\n", "  copy() in one rank's heap", sizeName(n), "", durName(fs.copy[k].avg), durName(fs.copy[k].median), durName(fs.copy[k].min), float64(n)/fs.copy[k].median)
	}
	res.latRows("floor-pingpong", "shm", 8, fs.ping)
	res.latRows("floor-twoline", "shm", 8, fs.two)
	res.latRows("floor-oneline", "shm", 8, fs.line)
	res.latRows("floor-ringflood", "shm", 8, fs.flood)
	res.latRows("floor-flagbarrier", "shm", 0, fs.flag)
	if fs.pinned {
		res.latRows("floor-switch", "shm", 0, fs.yield)
	}
	for k, n := range echoSizes {
		res.latRows("floor-copyecho", "shm", n, fs.echo[k])
	}
	for k, n := range copySizes {
		res.latRows("floor-copy", "local", n, fs.copy[k])
	}
}

// floorOnly is `gexbench floor`: the floors alone, printed by rank 0.
func floorOnly(cfg *config, c *gex.Client, tm *gex.TM, fs *floorStats, stdout io.Writer) error {
	if tm.QueryRank() != 0 {
		return nil
	}
	res := &results{}
	fmt.Fprintf(&res.table, "gexbench floor: the shared-memory floors between ranks 0 and 1, %d operations each in %d batches\n", floorItersOf(cfg), cfg.batches)
	fmt.Fprintf(&res.table, "avg = total time / operations, median and min = median and best of the batch averages\n\n")
	fmt.Fprintf(&res.table, "%-44s %10s %8s %12s %12s %12s\n", "floor", "size", "", "avg (us)", "median (us)", "min (us)")
	fs.rows(res)
	return cfg.output(res, c, tm, "shared memory (plain atomics)", stdout)
}

func floorItersOf(cfg *config) int {
	if cfg.iters > 0 {
		return cfg.iters
	}
	return floorIters
}
