package smp

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/internal/memcopy"
	"github.com/gexgo/gexgo/internal/shm"
)

// How a pooled payload (a Medium of more than maxInline bytes, or a Long
// to an unmapped peer) goes to another process. Cached stores (copy, or
// REP MOVSB for a request's 2-4 KiB: memcopy.CopyHot) leave its lines in
// this core's cache, where the receiver takes them from, and the next
// message reuses the same buffer (shm.Pool.TryAllocHot). Non-temporal
// stores (memcopy.CopyNT) put the lines in memory, where the receiver
// reads them, and the next message takes the next buffer round robin.
// Which is faster depends on how fast a line moves between the two cores
// against how fast memory is, and that depends on where the machine
// places them. On this project's 2-vCPU VM (docs/am.md, "Medium copies,
// sixth pass: chosen per job"): in its fast mode cached stores win below
// 32 KiB and non-temporal ones from there (64 KiB round trip 5.9-6.5 us
// against a cached copy echo of 9-9.5); in its slow mode non-temporal
// ones win from 2-4 KiB (4 KiB 1.4 against 2.1-2.3 us, 64 KiB 6.5-7
// against 33-35); in a third state seen once the cached 64 KiB echo took
// 2.4 us; and C GASNet's cached 64 KiB Medium took 4.44 us on the
// reference machine. No one length fits them all, so the first two ranks
// of the host time both ways at 4 KiB and 64 KiB when the conduit starts
// (calibrateBulk), and every rank of the host follows the outcome:
// non-temporal stores from 4, 8 or 16 KiB, from 32 KiB
// (memcopy.Threshold, the fast mode's), or never.
const (
	// EnvNonTemporal forces the length from which pooled payloads go
	// with non-temporal stores: a byte count (at least memcopy.NTMin), or
	// "never"; "auto" (or unset) times it. EnvBulkReport, set to 1, makes
	// the rank that times print the figures and the outcome to stderr.
	EnvNonTemporal = "GEX_SMP_NONTEMPORAL"
	EnvBulkReport  = "GEX_SMP_BULK_REPORT"

	ntNever = math.MaxInt32 // ntFrom: cached stores at every length

	// AM region header words (the first line's free words, after offDuo).
	// offBulkAsk: the owner will take part in the timing (1), written
	// before the regions are exchanged. offBulkSeq: the owner's step in
	// it. offBulkFrom: the outcome (a length, or ntNever), written by the
	// first rank of the host; 0 until then.
	offBulkAsk  = 32
	offBulkSeq  = 36
	offBulkFrom = 40

	// The timing: bulkWarm blocks of poolBufs round trips per size and
	// way first (untimed: they touch every buffer's pages), then
	// bulkBlocks blocks of bulkPerBlock round trips per size and way,
	// alternating. A way wins only below bulkMargin of the other's median
	// (bulkEven: bulkChoose). bulkBudget bounds the whole timing, which
	// takes 1-6 ms: a partner that does not answer by then (its process
	// died, and the job is ending) leaves the length at
	// memcopy.Threshold. It is generous because a timing cut short leaves
	// a buffer busy (the one whose answer or Put did not come: neither
	// side can free it safely), and a loaded machine must not cut it.
	bulkWarm     = 1
	bulkBlocks   = 3
	bulkPerBlock = 8
	bulkMargin   = 0.85
	bulkEven     = 1.25
	bulkBudget   = 5 * time.Second
	bulkDone     = 1 << 31 // offBulkSeq: the leader is done
)

// bulkWanted reports whether this rank takes part in the timing, from
// EnvNonTemporal and the host's ranks: two or more, and no more than CPUs
// (with more ranks than CPUs the two timed ranks would share a CPU with
// others, and the figures would say nothing). It sets c.ntFrom when
// EnvNonTemporal forces the length.
func (c *Conduit) bulkWanted(local, cpus int) bool {
	switch v := os.Getenv(EnvNonTemporal); v {
	case "", "auto":
	case "never":
		c.ntFrom.Store(ntNever)
		return false
	default:
		n, err := strconv.Atoi(v)
		if err == nil && n >= memcopy.NTMin {
			c.ntFrom.Store(int32(min(n, ntNever)))
			return false
		}
		fmt.Fprintf(os.Stderr, "gexgo: ignoring %s=%q: not auto, never or a byte count of at least %d\n", EnvNonTemporal, v, memcopy.NTMin)
	}
	return local > 1 && local <= cpus
}

// bulkPair returns the first two ranks of this host (the leader, which
// times, and its partner), or -1s if there are fewer than two.
func (c *Conduit) bulkPair() (leader, partner int) {
	leader, partner = -1, -1
	for p := range c.peers {
		if c.peers[p].remote {
			continue
		}
		if leader < 0 {
			leader = p
		} else {
			return leader, p
		}
	}
	return -1, -1
}

// calibrateBulk runs after the regions are mapped: the host's leader and
// partner, if both asked to (offBulkAsk), time a Medium echo's two copies
// each way at each of bulkSizes. The leader copies a payload from its heap
// into its request pool buffer for the partner and bumps its step word;
// the partner copies that buffer into its reply pool buffer for the
// leader and answers with the same step. The pools carry no message yet,
// and the leader is done with them (its last step answered) before it
// publishes the outcome. Other ranks read the outcome when they first
// need it (ntFromNow).
func (c *Conduit) calibrateBulk() {
	leader, partner := c.bulkPair()
	if c.rank != leader && c.rank != partner {
		return
	}
	lb, pb := c.peers[leader].region.Bytes(), c.peers[partner].region.Bytes()
	if shm.Uint32At(lb, offBulkAsk).Load() != 1 || shm.Uint32At(pb, offBulkAsk).Load() != 1 {
		return
	}
	leaderSeq, partnerSeq := shm.Uint32At(lb, offBulkSeq), shm.Uint32At(pb, offBulkSeq)
	start := time.Now()
	deadline := start.Add(bulkBudget)
	if c.rank == partner {
		c.bulkAnswer(leader, leaderSeq, partnerSeq, deadline)
		return
	}
	med := c.bulkTime(partner, leaderSeq, partnerSeq, deadline)
	from := bulkChoose(med)
	shm.Uint32At(lb, offBulkFrom).Store(uint32(from))
	leaderSeq.Store(bulkDone)
	c.ntFrom.Store(from)
	if os.Getenv(EnvBulkReport) == "1" {
		what := "never"
		if from != ntNever {
			what = "from " + strconv.Itoa(int(from)) + " bytes"
		}
		var figs strings.Builder
		for i, m := range med {
			fmt.Fprintf(&figs, "%d KiB non-temporal %.2f cached %.2f, ", bulkSizes[i]>>10, m[0], m[1])
		}
		fmt.Fprintf(os.Stderr, "gexgo: smp pooled copies, echo medians in us: %snon-temporal %s (timed in %v)\n",
			figs.String(), what, time.Since(start).Round(time.Microsecond))
	}
}

// bulkSizes are the lengths timed: the outcome is non-temporal stores from
// one of the smaller ones, from memcopy.Threshold, or never (bulkChoose).
var bulkSizes = [...]int{4 << 10, 8 << 10, 16 << 10, poolBufSize}

// A step word: bit 0 the way (cached), bits 1-2 the size (an index into
// bulkSizes), bits 3-4 the pool buffer the payload is in, the rest the
// round. The partner answers with the same word, its reply buffer in
// bits 3-4.
const (
	stepBufShift   = 3
	stepRoundShift = 5
)

var _ [4 - poolBufs]struct{} // a buffer index fits in bits 3-4

// bulkStepWay decodes step s's way and length.
func bulkStepWay(s uint32) (cached bool, n int) {
	return s&1 != 0, bulkSizes[min(int(s>>1&3), len(bulkSizes)-1)]
}

// bulkAlloc takes a pool buffer as the conduit's sends do: the hot one for
// cached stores, the next one round robin for non-temporal ones.
func bulkAlloc(pool *shm.Pool, cached bool) (int, []byte, bool) {
	if cached {
		return pool.TryAllocHot()
	}
	return pool.TryAlloc()
}

// bulkTime is the leader's side: the medians in us by size (bulkSizes'
// order) and way (0 non-temporal, 1 cached); zeros if the timing did not
// finish.
func (c *Conduit) bulkTime(partner int, mine, theirs *atomic.Uint32, deadline time.Time) (med bulkMedians) {
	src := make([]byte, poolBufSize)
	for i := range src {
		src[i] = byte(i)
	}
	pool, replies := c.peers[partner].out[0], c.peers[partner].in[1]
	var times [len(bulkSizes)][2][]float64
	round := uint32(0)
	for block := 0; block < bulkWarm+bulkBlocks; block++ {
		n := bulkPerBlock
		if block < bulkWarm {
			n = poolBufs // every buffer touched before the timed steps
		}
		for size := range uint32(len(bulkSizes)) {
			for way := uint32(0); way < 2; way++ {
				for range n {
					round++
					cached, nbytes := bulkStepWay(size<<1 | way)
					t0 := time.Now()
					idx, b, ok := bulkAlloc(pool, cached)
					if !ok {
						return bulkMedians{}
					}
					poolCopy(b[:nbytes], src[:nbytes], true, cached)
					mine.Store(round<<stepRoundShift | uint32(idx)<<stepBufShift | size<<1 | way)
					if !bulkAwait(theirs, func(v uint32) bool { return v>>stepRoundShift == round }, deadline) {
						return bulkMedians{}
					}
					replies.Put(int(theirs.Load() >> stepBufShift & 3))
					if block >= bulkWarm {
						times[size][way] = append(times[size][way], float64(time.Since(t0).Nanoseconds())/1e3)
					}
				}
			}
		}
	}
	for size := range times {
		for way := range times[size] {
			med[size][way] = median(times[size][way])
		}
	}
	return med
}

// bulkMedians are bulkTime's figures.
type bulkMedians [len(bulkSizes)][2]float64

// bulkChoose is the outcome of the medians:
//
//   - never, if cached stores win at the largest size;
//   - else, if non-temporal stores win at a size below memcopy.Threshold,
//     from the smallest size where they cost at most bulkEven of the
//     cached ones (the sizes from there on being taken as won);
//   - else from memcopy.Threshold, the length the fast mode of this
//     project's VM wants, which the conduit also keeps when the timing
//     could not tell (an unfinished timing: zeros).
//
// A way wins only below bulkMargin of the other's median: the machine may
// change its state during the job. bulkEven is looser because the AM round
// trip measured the cached stores' cost at small sizes higher than the
// timing does, in the one state where non-temporal stores win there
// (docs/am.md, "Medium copies, sixth pass"): in the VM's slow mode the
// timing put 4 KiB at 1.03-1.19x and 8 KiB at 0.86-0.91x of the cached
// stores, where the AM took 1.70 against 2.50 us and 2.2 against 3.5.
func bulkChoose(med bulkMedians) int32 {
	ok := func(m [2]float64) bool { return m[0] > 0 && m[1] > 0 }
	last := len(med) - 1
	if ok(med[last]) && med[last][1] < bulkMargin*med[last][0] {
		return ntNever
	}
	won := -1
	for i, m := range med[:last] {
		if bulkSizes[i] < memcopy.Threshold && ok(m) && m[0] < bulkMargin*m[1] {
			won = i
			break
		}
	}
	if won < 0 {
		return memcopy.Threshold
	}
	for i, m := range med[:won] {
		if ok(m) && m[0] <= bulkEven*m[1] {
			return int32(bulkSizes[i])
		}
	}
	return int32(bulkSizes[won])
}

// bulkAnswer is the partner's side: for each step it copies the leader's
// buffer into a reply buffer of its own, answers, and frees the leader's
// buffer (the order of a Medium handler's reply and the Put after it),
// until the leader is done or the time is up.
func (c *Conduit) bulkAnswer(leader int, theirs, mine *atomic.Uint32, deadline time.Time) {
	in, out := c.peers[leader].in[0], c.peers[leader].out[1]
	last := uint32(0)
	for {
		if !bulkAwait(theirs, func(v uint32) bool { return v != last }, deadline) {
			return
		}
		s := theirs.Load()
		if s == bulkDone {
			return
		}
		cached, n := bulkStepWay(s)
		idx := int(s >> stepBufShift & 3)
		from, err := in.Buf(idx)
		ridx, to, ok := bulkAlloc(out, cached)
		if err != nil || !ok {
			return
		}
		poolCopy(to[:n], from[:n], false, cached)
		mine.Store(s&^(3<<stepBufShift) | uint32(ridx)<<stepBufShift)
		in.Put(idx)
		last = s
	}
}

// bulkAwait waits until done says yes to w's value; false if the
// deadline passed first.
func bulkAwait(w *atomic.Uint32, done func(uint32) bool, deadline time.Time) bool {
	for i := 1; !done(w.Load()); i++ {
		if i%256 == 0 {
			if time.Now().After(deadline) {
				return false
			}
			runtime.Gosched()
		}
	}
	return true
}

// median sorts v and returns its middle value (0 if v is empty).
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// ntFromNow is the length from which pooled payloads to other processes
// go with non-temporal stores: the forced or timed one, else the host
// leader's outcome, read from its region header until it is there
// (memcopy.Threshold until then).
func (c *Conduit) ntFromNow() int {
	if v := c.ntFrom.Load(); v != 0 {
		return int(v)
	}
	return c.ntFromLeader()
}

func (c *Conduit) ntFromLeader() int {
	leader, _ := c.bulkPair()
	if leader < 0 {
		c.ntFrom.Store(memcopy.Threshold)
		return memcopy.Threshold
	}
	v := int32(shm.Uint32At(c.peers[leader].region.Bytes(), offBulkFrom).Load())
	if v == 0 {
		return memcopy.Threshold
	}
	c.ntFrom.Store(v)
	return int(v)
}

// poolCopy copies a pooled payload to another process: into the hot
// buffer with cached stores (a request's 2-4 KiB with REP MOVSB:
// memcopy.CopyHot, docs/am.md "Medium copies, fifth pass"), else with
// non-temporal stores.
func poolCopy(to, from []byte, isReq, cached bool) {
	switch {
	case !cached:
		memcopy.CopyNT(to, from)
	case isReq && len(from) <= memcopy.HotMax:
		memcopy.CopyHot(to, from)
	default:
		copy(to, from)
	}
}
