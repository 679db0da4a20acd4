// Command gexbench measures gexgo's one-sided RMA and remote atomics between
// rank 0 and rank 1, in the shapes of GASNet's tests/testsmall (blocking
// latency), tests/testlarge (NBI flood bandwidth) and tests/testfaddperf
// (FADD latency and flood rate). Run it with the launcher:
//
//	gexrun -n 2 ./cmd/gexbench put     # PutBlocking latency, 8 B .. 4 KiB
//	gexrun -n 2 ./cmd/gexbench get     # GetBlocking latency, 8 B .. 4 KiB
//	gexrun -n 2 ./cmd/gexbench flood   # PutNBI / GetNBI bandwidth, 8 B .. 4 MiB
//	gexrun -n 2 ./cmd/gexbench atomic  # U64/U32 FADD latency, U64 FADD flood rate
//	gexrun -n 2 ./cmd/gexbench am      # AM Short/Medium/Long round trips
//	gexrun -n 2 ./cmd/gexbench vis     # vector/indexed/strided put/get bandwidth, 8 B and 512 B chunks
//	gexrun -n 4 ./cmd/gexbench barrier # BarrierNB over all ranks
//	gexrun -n 4 ./cmd/gexbench bcast   # BroadcastNB, 8 B .. 1 MiB
//	gexrun -n 4 ./cmd/gexbench reduce  # ReduceToAllNB / ReduceToOneNB, 8 B and 1 MiB
//	gexrun -n 2 --netns 2 ./cmd/gexbench rawtcp  # the raw TCP floor: busy-polled 8 B ping-pong, stream
//
// Rank 0 measures and prints; rank 1 polls (so that the AM path makes
// progress) and prints nothing; further ranks only take part in the barriers.
// Each benchmark says which path it measured: "shared-memory (mapped)" when
// rank 1's segment is mapped at rank 0 (an RMA is a copy, an atomic a CPU
// atomic), "AM protocol" when it is not (GASNET_SUPERNODE_MAXSIZE=1 selects
// it). The atomic benchmark ends by checking that its counters hold the number
// of FADDs performed. -csv prints rows
// bench,path,size,metric,value,unit instead of the table; -cpuprofile writes
// rank 0's CPU profile of the measurements. Run "gexbench -help" for the
// flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gexgo/gexgo/gex"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const synopsis = "usage: gexrun -n 2 gexbench put|get|flood|atomic|am|vis|barrier|bcast|reduce|rawtcp [flags]"

const usageHead = synopsis + `

Micro-benchmarks of gexgo's RMA and remote atomics between rank 0 and rank 1
(at least 2 ranks).
Rank 0 prints the results; the other ranks print nothing unless an error occurs.

  put     PutBlocking latency (remote completion) of 8 B, as GASNet's testsmall,
          and of 64 B, 512 B and 4 KiB; with a plain Go copy() of 8 B for reference
  get     GetBlocking latency, same sizes and reference
  flood   PutNBI and GetNBI bandwidth (MiB/s, MiB = 2^20), as GASNet's testlarge:
          a window of NBI operations of one size, then NBIWait, repeated -reps
          times per sample; sizes 8 B, 64 B, 512 B, 4 KiB, 64 KiB, 512 KiB, 4 MiB
  atomic  remote atomics on a counter in rank 1's segment, as GASNet's
          testfaddperf: U64 and U32 GEX_OP_FADD of 1 latency (OpNB, then
          Event.Wait), and the U64 FADD flood rate (M ops/s): -reps OpNBI FADDs,
          then one NBIWait(ECRMW), per sample; a sync/atomic add for reference.
          Finally rank 0 reads the counters (GEX_OP_GET and GetBlocking) and
          checks they equal the number of FADDs performed
  vis     VIS bandwidth (GB/s, 10^9 B/s of payload), as GASNet's testvis: one
          blocking vector, indexed or strided put or get of a 64 KiB payload at
          50% density (chunks of 8 B or 512 B every 2 chunks, both sides);
          -samples samples of about 40 ms (or -reps operations) each; the
          remote chunks are checked after every measurement
  am      Active Message round trips, as GASNet's testam: a Short, a Medium (8 B,
          4 KiB, 64 KiB) or a Long (same sizes, into rank 1's segment) request,
          answered from the handler by a reply of the same kind; -iters round
          trips per case (default 20000)
  barrier BarrierNB + Wait over all ranks of the job, back to back
  rawtcp  the floor under the tcp conduit, in the same job: an 8 B ping-pong and
          a one-way stream (writes of 64 KiB and 1 MiB) on plain non-blocking
          sockets between ranks 0 and 1, busy-polled, no gexgo in the path
  bcast   BroadcastNB + Wait of 8 B, 4 KiB, 64 KiB and 1 MiB over all ranks, the
          root rotating; time per broadcast and GB/s (GB = 10^9 bytes); from 64 KiB
          also with the source in the root's segment (copied by the members through
          the mapping when they share the root's neighbourhood)
  reduce  ReduceToAllNB + Wait and ReduceToOneNB + Wait (root rotating) of 8 B and
          1 MiB (U64 GEX_OP_ADD) over all ranks
          The collectives run on every rank; rank 0 prints its timings. -iters sets
          the calls per case (default 100000; 3000 from 64 KiB; 300 from 1 MiB)

Latency: -iters operations per size (atomic: per type), timed in batches; the table gives the
average (total time / iterations), the median and the minimum of the batch
averages. Bandwidth and FADD rate: -samples samples (per size); the table gives
the median and the best sample.

Paths: when rank 1's segment is mapped into rank 0 (same neighbourhood, the
default on one machine) an RMA is a copy through the mapping and an atomic a CPU
atomic on it: "shared-memory (mapped)". Set GASNET_SUPERNODE_MAXSIZE=1 to measure the AM reference protocol
instead ("AM protocol"):

  GASNET_SUPERNODE_MAXSIZE=1 gexrun -n 2 gexbench put

The segment each rank attaches is max(-window, -max) rounded up to a page; raise
GASNET_MAX_SEGSIZE if it does not fit. GEX_WAITMODE (spin, block, spinblock)
changes how rank 1 polls. With -csv the path column is "mapped" or "am"; the
reference rows (bench "copy", "move8" and "xadd64", path "local") are plain Go
without gexgo. The atomic rows are fadd-u64 (size 8) and fadd-u32 (size 4) in
ns, and fadd-flood-u64 in Mops/s (millions of operations per second).

Flags (after the benchmark name):
`

// config is a parsed command line.
type config struct {
	bench      string
	iters      int
	batches    int
	window     int
	reps       int
	samples    int
	minSize    int
	maxSize    int
	reuse      bool
	csv        bool
	cpuprofile string
}

// errUsage reports a bad command line (exit code 2); the message has been
// printed.
var errUsage = errors.New("usage")

// rank0 reports whether this process is (or, before ClientInit, will be)
// rank 0, so that only one rank of a job prints usage text.
func rank0() bool {
	r := os.Getenv("GEX_RANK")
	return r == "" || r == "0"
}

// parseArgs parses the benchmark name and its flags. On -help it prints the
// usage and returns flag.ErrHelp.
func parseArgs(args []string, stderr io.Writer) (config, error) {
	var cfg config
	if !rank0() {
		stderr = io.Discard
	}
	fs := flag.NewFlagSet("gexbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.iters, "iters", 0, "latency: operations per size or atomic type (0 = 1000000 on the mapped path, 100000 on the AM path)")
	fs.IntVar(&cfg.batches, "batches", 100, "latency: batches the iterations are timed in (median and min are over batches)")
	fs.IntVar(&cfg.window, "window", 1<<20, "flood: bytes per window: max(1, window/size) NBI operations, then NBIWait")
	fs.IntVar(&cfg.reps, "reps", 0, "flood: windows per sample; atomic: OpNBI FADDs per sample (0 = as many as fill about 40 ms)")
	fs.IntVar(&cfg.samples, "samples", 5, "flood: samples per size (median and best are over samples)")
	fs.IntVar(&cfg.minSize, "min", 8, "smallest transfer size in bytes (flood; put and get measure the sizes 8, 64, 512, 4096 within -min..-max)")
	fs.IntVar(&cfg.maxSize, "max", 4<<20, "largest transfer size in bytes (flood; put and get as -min)")
	fs.BoolVar(&cfg.reuse, "reuse", false, "flood: every operation of a window uses the same local and remote bytes (as testlarge does; cache-resident)")
	fs.BoolVar(&cfg.csv, "csv", false, "print CSV rows bench,path,size,metric,value,unit instead of the table")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write rank 0's CPU profile of the measurements to this file")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHead)
		fs.PrintDefaults()
	}
	if len(args) == 0 {
		fs.Usage()
		return cfg, errUsage
	}
	if a := args[0]; a == "-h" || a == "-help" || a == "--help" || a == "help" {
		fs.Usage()
		return cfg, flag.ErrHelp
	}
	cfg.bench = args[0]
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			return cfg, err
		}
		return cfg, errUsage
	}
	bad := func(format string, a ...any) (config, error) {
		fmt.Fprintf(stderr, "gexbench: "+format+"\n%s\n", append(a, synopsis)...)
		return cfg, errUsage
	}
	switch {
	case !contains2(benches, cfg.bench):
		return bad("unknown benchmark %q (want one of %s)", cfg.bench, strings.Join(benches, ", "))
	case fs.NArg() != 0:
		return bad("unexpected arguments %q", fs.Args())
	case cfg.iters < 0:
		return bad("-iters %d is negative", cfg.iters)
	case cfg.batches < 1:
		return bad("-batches %d must be at least 1", cfg.batches)
	case cfg.window < 1:
		return bad("-window %d must be at least 1", cfg.window)
	case cfg.reps < 0:
		return bad("-reps %d is negative", cfg.reps)
	case cfg.samples < 1:
		return bad("-samples %d must be at least 1", cfg.samples)
	case cfg.minSize < 1 || cfg.maxSize < cfg.minSize:
		return bad("-min %d / -max %d: need 1 <= min <= max", cfg.minSize, cfg.maxSize)
	case (cfg.bench == "put" || cfg.bench == "get") && len(cfg.latencySizes()) == 0:
		return bad("-min %d / -max %d select none of the latency sizes %v", cfg.minSize, cfg.maxSize, latencySizes)
	}
	return cfg, nil
}

// startProfile starts the -cpuprofile profile, if asked for; stop ends it.
func (cfg *config) startProfile() (stop func(), err error) {
	if cfg.cpuprofile == "" {
		return func() {}, nil
	}
	f, err := os.Create(cfg.cpuprofile)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// benches are the benchmark names.
var benches = []string{"put", "get", "flood", "atomic", "am", "vis", "barrier", "bcast", "reduce", "rawtcp"}

// collective reports whether the benchmark runs on every rank.
func (cfg *config) collective() bool {
	return cfg.bench == "barrier" || cfg.bench == "bcast" || cfg.bench == "reduce"
}

func contains2(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// floodSizes are testlarge-like sizes; -min and -max select among them and are
// added when they are not in the list.
var floodSizes = []int{8, 64, 512, 4 << 10, 64 << 10, 512 << 10, 4 << 20}

// latencySizes are the sizes of the put and get benchmarks (8 B first: the
// testsmall figure).
var latencySizes = []int{8, 64, 512, 4 << 10}

// latencySizes are the sizes of latencySizes within [-min, -max].
func (cfg *config) latencySizes() []int {
	var out []int
	for _, s := range latencySizes {
		if s >= cfg.minSize && s <= cfg.maxSize {
			out = append(out, s)
		}
	}
	return out
}

func (cfg *config) floodSizes() []int {
	var out []int
	for _, s := range append([]int{cfg.minSize, cfg.maxSize}, floodSizes...) {
		if s >= cfg.minSize && s <= cfg.maxSize && !contains(out, s) {
			out = append(out, s)
		}
	}
	sort.Ints(out)
	return out
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// segmentSize is the segment every rank attaches: room for the largest
// transfer and for a window of transfers, rounded up to a page.
func (cfg *config) segmentSize() uint64 {
	n := latencySizes[len(latencySizes)-1] // the put and get checks read this much
	if cfg.bench == "vis" {
		n = max(n, visSpan)
	}
	if cfg.bench == "bcast" {
		n = max(n, 1<<20) // broadcasts from the root's segment
	}
	if cfg.bench == "am" {
		n = max(n, 64<<10) // the largest Medium and Long payloads
	}
	if cfg.bench == "flood" {
		for _, s := range cfg.floodSizes() {
			n = max(n, span(s, cfg.window))
		}
	}
	return (uint64(n) + gex.PageSize - 1) / gex.PageSize * gex.PageSize
}

// span is the number of distinct bytes a flood window of size-byte operations
// covers.
func span(size, window int) int { return max(1, window/size) * size }

// Handler indices of gexbench.
const hBarrier gex.AMIndex = gex.AMIndexBase

// run is gexbench with its arguments and output streams; it returns the exit
// code. It is a whole rank of the job: ClientInit, the benchmark, and the
// final barrier.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args, stderr)
	switch {
	case err == flag.ErrHelp:
		return 0
	case err != nil:
		return 2
	}
	c, ep, tm, err := gex.ClientInit("GEXBENCH", 0)
	if err != nil {
		fmt.Fprintln(stderr, "gexbench:", err)
		return 1
	}
	defer c.Close()
	me, n := tm.QueryRank(), tm.QuerySize()
	fail := func(err error) int {
		fmt.Fprintf(stderr, "gexbench: rank %d: %v\n", me, err)
		return 1
	}
	if n < 2 {
		fmt.Fprintf(stderr, "gexbench: needs at least 2 ranks, this job has %d; start it with the launcher, e.g.\n  gexrun -n 2 gexbench %s\n", n, cfg.bench)
		return 2
	}

	// A barrier over AMs, as in examples/amping (gex has no collectives yet):
	// every rank tells every other one it arrived, then polls until all
	// have. Arrivals are counted by epoch parity, so a fast rank's next
	// barrier cannot be mistaken for this one.
	var arrived [2]atomic.Int32
	if err := ep.RegisterHandlers([]gex.AMEntry{{
		Index: hBarrier, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 1, Name: "gexbench-barrier",
		Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { arrived[a[0]&1].Add(1) },
	}}); err != nil {
		return fail(err)
	}
	var rawAddr atomic.Pointer[string]
	if err := ep.RegisterHandlers(rawHandlers(&rawAddr)); err != nil {
		return fail(err)
	}
	var am *amState
	if cfg.bench == "am" {
		am = &amState{}
		if err := ep.RegisterHandlers(amHandlers(am)); err != nil {
			return fail(err)
		}
	}
	epoch := int32(0)
	barrier := func() error {
		for r := gex.Rank(0); r < n; r++ {
			if r != me {
				if err := tm.RequestShort(r, hBarrier, 0, epoch); err != nil {
					return err
				}
			}
		}
		slot := &arrived[epoch&1]
		if err := c.BlockUntil(func() bool { return slot.Load() >= int32(n-1) }); err != nil {
			return err
		}
		slot.Add(-int32(n - 1))
		epoch++
		return nil
	}

	// SegmentAttach ends with a barrier: every rank has registered its
	// handler once it returns.
	size := cfg.segmentSize()
	if limit := c.MaxGlobalSegmentSize(); size > limit {
		return fail(fmt.Errorf("the benchmark needs a %d-byte segment, but GASNET_MAX_SEGSIZE allows %d; raise it or lower -window/-max", size, limit))
	}
	seg, err := gex.SegmentAttach(tm, size)
	if err != nil {
		return fail(err)
	}
	fillPattern(seg.Bytes(), me)
	if am != nil {
		other := gex.Rank(1)
		if me == 1 {
			other = 0
		}
		if me <= 1 {
			bs, ev, err := tm.QueryBoundSegmentNB(other, 0)
			if err == nil {
				err = ev.Wait()
			}
			if err != nil {
				return fail(err)
			}
			am.seg, am.peer = seg.Bytes(), bs.Owner
		}
	}
	var ads *domains
	if cfg.bench == "atomic" {
		// Collective: every rank creates the domains.
		if ads, err = newDomains(tm); err != nil {
			return fail(err)
		}
	}
	if err := barrier(); err != nil {
		return fail(err)
	}

	// Rank 0 measures while every other rank polls in the barrier, so the
	// AM path's requests to rank 1 are served.
	var benchErr error
	switch {
	case cfg.collective():
		benchErr = measureColl(&cfg, c, tm, seg, stdout)
	case cfg.bench == "rawtcp":
		benchErr = rawTCP(&cfg, c, tm, &rawAddr, stdout)
	case me == 0:
		benchErr = measure(&cfg, c, tm, seg, ads, am, stdout)
	}
	// No rank leaves while another may still need it to poll.
	if err := barrier(); err != nil {
		return fail(err)
	}
	if benchErr != nil {
		return fail(benchErr)
	}
	if ads != nil {
		// Every rank's operations completed before the barrier.
		if err := ads.destroy(); err != nil {
			return fail(err)
		}
	}
	return 0
}

// measure runs the selected benchmark on rank 0 and prints its results.
func measure(cfg *config, c *gex.Client, tm *gex.TM, seg *gex.Segment, ads *domains, am *amState, stdout io.Writer) error {
	peer, _, err := tm.QueryBoundSegmentNB(1, gex.FlagImmediate)
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, c: c, tm: tm, local: seg.Bytes(), remote: peer.Owner, mapped: peer.Local != nil}
	if cfg.iters == 0 {
		cfg.iters = 1000000
		if !b.mapped {
			cfg.iters = 100000
		}
		if cfg.bench == "am" {
			cfg.iters = 20000
		}
	}
	stop, err := cfg.startProfile()
	if err != nil {
		return err
	}
	defer stop()
	var res *results
	switch cfg.bench {
	case "put", "get":
		res, err = b.latency(cfg.bench == "put")
	case "flood":
		res, err = b.flood()
	case "atomic":
		res, err = b.atomic(ads)
	case "am":
		res, err = b.amRoundTrips(am)
	case "vis":
		res, err = b.vis()
	}
	if err != nil {
		return err
	}
	if cfg.csv {
		res.writeCSV(stdout)
	} else {
		res.writeTable(stdout)
	}
	return nil
}

// pathName names the path an RMA to rank 1 takes, for the table and the CSV.
func pathName(mapped bool) (long, short string) {
	if mapped {
		return "shared-memory (mapped)", "mapped"
	}
	return "AM protocol", "am"
}

// sizeName spells a byte count as the tables do: 8 B, 4 KiB, 4 MiB.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " B"
}

// durName spells nanoseconds in ns below 1 us and in us above.
func durName(ns float64) string {
	if ns < 1000 {
		return strconv.FormatFloat(ns, 'f', 1, 64) + " ns"
	}
	return strconv.FormatFloat(ns/1000, 'f', 2, 64) + " us"
}

// groupDigits writes v rounded to an integer with thousands separators.
func groupDigits(v float64) string {
	s := strconv.FormatFloat(v, 'f', 0, 64)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}
