// Command gexbench measures gexgo's one-sided RMA, remote atomics, Active
// Messages, VIS and collectives between rank 0 and rank 1, in the shapes of
// GASNet's tests (testsmall, testlarge, testfaddperf, testam, testvis) and as
// the OSU micro-benchmarks report: sizes swept over the powers of two from
// -min to -max, latency in microseconds, bandwidth in MB/s (10^6 B/s), a
// header naming the version, conduit, path, ranks and hosts. Run it with the
// launcher:
//
//	gexrun -n 2 ./cmd/gexbench put -min 8 -max 1048576 -plot put.svg
//	gexrun -n 2 ./cmd/gexbench get     # GetBlocking latency
//	gexrun -n 2 ./cmd/gexbench flood   # PutNBI / GetNBI bandwidth
//	gexrun -n 2 ./cmd/gexbench atomic  # U64/U32 FADD latency, U64 FADD flood rate
//	gexrun -n 2 ./cmd/gexbench am      # AM Short/Medium/Long round trips
//	gexrun -n 2 ./cmd/gexbench vis     # vector/indexed/strided put/get bandwidth
//	gexrun -n 4 ./cmd/gexbench barrier # BarrierNB over all ranks
//	gexrun -n 4 ./cmd/gexbench bcast   # BroadcastNB
//	gexrun -n 4 ./cmd/gexbench reduce  # ReduceToAllNB / ReduceToOneNB
//	gexbench -compare a.csv,b.csv -plot ab.svg   # earlier -csv runs in one plot
//	gexrun -n 2 ./cmd/gexbench put -api gasnet1  # GASNet-1 layer beside EX (put, get, am, barrier)
//	gexrun -n 2 --netns 2 ./cmd/gexbench rawtcp  # the raw TCP floor: busy-polled 8 B ping-pong, stream
//	gexrun -n 2 --pretend-hosts 2 ./cmd/gexbench tcplat  # tcp rows and the raw floor interleaved in one job
//
// Rank 0 measures and prints; rank 1 polls (so that the AM path makes
// progress) and prints nothing; further ranks only take part in the barriers.
// -csv prints rows bench,path,size,metric,value,unit (documented in
// "gexbench -help") instead of the table; -plot draws the results with
// gonum's plot package; -cpuprofile writes rank 0's CPU profile of the
// measurements (every rank's, into its own file, when the name holds %r).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gexgo/gexgo/gex"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const synopsis = "usage: gexrun -n 2 gexbench put|get|flood|atomic|am|vis|barrier|bcast|reduce|rawtcp|tcplat|floor [flags]"

const usageHead = synopsis + `
       gexbench -compare A.csv[,B.csv...] -plot FILE.svg [-title T]   (no job: plot earlier runs)
       gexbench --version

Micro-benchmarks of gexgo between rank 0 and rank 1 (at least 2 ranks), in the
shapes of GASNet's tests and the OSU micro-benchmarks. Rank 0 prints the
results; the other ranks print nothing unless an error occurs.

Every benchmark with a size sweeps the powers of two from -min to -max (and
-min and -max themselves), as the OSU benchmarks do. One unit per column:
latency in us (microseconds), bandwidth in MB/s (10^6 bytes/s, as OSU), rates
in Mops/s. Every output starts with "# " lines naming the gexgo version, the
benchmark, the conduit and path, the ranks and the hosts, and the units.

  put     PutBlocking latency (remote completion), as testsmall / osu_put_latency;
          with a plain Go copy() of 8 B for reference. Above 8 KiB the operations
          per size fall in proportion (-iters*8KiB/size, at least 100)
  get     GetBlocking latency, same sizes and reference
  flood   PutNBI and GetNBI bandwidth, as testlarge / osu_put_bw: a window of NBI
          operations of one size, then NBIWait, repeated -reps times per sample
  atomic  remote atomics on a counter in rank 1's segment, as testfaddperf: U64
          and U32 GEX_OP_FADD latency (OpNB, then Event.Wait), and the U64 FADD
          flood rate (-reps OpNBI FADDs, then one NBIWait(ECRMW), per sample); a
          sync/atomic add for reference. Finally rank 0 reads the counters
          (GEX_OP_GET and GetBlocking) and checks they equal the FADDs performed
  vis     VIS bandwidth of payload, as testvis: one blocking vector, indexed or
          strided put or get of a 64 KiB payload at 50% density (chunk c every 2c
          bytes, both sides), c swept from -min to min(-max, 32 KiB); the remote
          chunks are checked after every measurement
  am      Active Message round trips, as testam: a Short, then Mediums and Longs
          (into rank 1's segment) of the swept sizes up to the AM limits, each
          answered from the handler by a reply of the same kind (-iters default
          20000); with the cache-line, two-line and one-line ping-pong, ring
          flood and copy echo floors of the same run (floor)
  barrier BarrierNB + Wait over all ranks of the job, back to back; with the
          two-process flag barrier and process switch floors of the same run
          (below)
  floor   the shared-memory floors alone, between ranks 0 and 1 (no gexgo call
          in the loop; sync/atomic on a word of rank 0's segment, which rank 1
          maps): a cache-line ping-pong round trip (one word that both ranks
          write; printed with am as its reference), a two-line ping-pong
          round trip (rank 0 writes line A, rank 1 waits for it and writes
          line B, rank 0 waits for B: a request line and a reply line, as an
          AM round trip moves at least), a one-line ping-pong (a message
          and its reply written over it in one line, as the duo lines), a
          one-way ring flood (rank 0 writes messages into a ring of 256
          64-byte slots, rank 1 reads them and publishes its position every
          32: the time per message under the AM one-way flood; row
          floor-ringflood), a process switch round trip
          (ranks 0 and 1 pinned to CPU 0 for the moment hand a word back and
          forth, calling sched_yield while they wait: two process switches,
          the floor under a barrier of more ranks than CPUs; row floor-switch,
          absent where a rank may not pin), a two-process flag barrier (each
          rank stores the barrier's number in its own line and spins until
          the other's holds it; printed with barrier) and a copy echo of 4 KiB and 64 KiB (rank 0
          copies the bytes from its heap into a buffer A of the segment with
          copy() and stores a flag, rank 1 copies A into a second buffer B and
          answers: the Medium round trip's copies without the conduit; printed
          with am), and copy() of 64 KiB and 1 MiB in rank 0's heap alone, in
          pieces of at most 256 KiB as the library copies (the machine's
          memcpy speed under the bulk rows; row floor-copy, path local; 256
          MiB copied per size whatever -iters says). -iters sets
          the operations (default 200000; the 64 KiB echo does 1/8 of them,
          the switch round trip 1/20)
  rawtcp  the floor under the tcp conduit, in the same job: an 8 B ping-pong and
          a one-way stream (writes of 64 KiB and 1 MiB) on plain non-blocking
          sockets between ranks 0 and 1, busy-polled, no gexgo in the path
  tcplat  the tcp conduit's rows beside rawtcp's floor in ONE job (exactly 2 ranks on
          2 hosts), interleaved: -rounds rounds, each -batches batches in which the raw
          8 B ping-pong, AM Short and Medium 8 B round trips, 8 B PutBlocking and
          GetBlocking, U64 FADD and BarrierNB+Wait run -iters/-batches operations in
          turn (-iters default 20000); then -samples times the raw streams (64 KiB and
          1 MiB writes, busy and poll(2), CUBIC) and a PutNBI and a GetNBI flood of
          -max bytes. Prints each round's ratios to its own raw floor (latency: the
          median over batches of row / the raw batch before it; floods: median sample
          / the best raw stream) and which rounds meet issue 13's targets
  bcast   BroadcastNB + Wait over all ranks, the root rotating, sizes up to 4 MiB;
          from 64 KiB also with the source in the root's segment
  reduce  ReduceToAllNB + Wait and ReduceToOneNB + Wait (root rotating), U64
          GEX_OP_ADD, sizes in whole elements up to 4 MiB
          The collectives run on every rank; rank 0 prints its timings. -iters sets
          the calls per case (default 100000; 3000 from 64 KiB; 300 from 1 MiB)

Latency: -iters operations per size, timed in -batches batches; avg = total
time / operations, median and min = median and best of the batch averages.
Bandwidth and rates: -samples samples per size; median and best sample.

Paths (the header and the CSV's path column): "smp mapped" / smp-mapped when
rank 1's segment is mapped into rank 0 (same neighbourhood, the default on one
machine: an RMA is a copy, an atomic a CPU atomic); "smp AM" / smp-am when it
is not (GASNET_SUPERNODE_MAXSIZE=1 selects the AM reference protocol); "tcp" /
tcp when rank 1 is on another host (GEX_CONDUIT=tcp, gexrun --hosts or
--pretend-hosts). The collectives' path is smp-shm (every rank in one
neighbourhood: the shared collective areas, docs/coll.md), smp-am or tcp.

  GASNET_SUPERNODE_MAXSIZE=1 gexrun -n 2 -x GASNET_SUPERNODE_MAXSIZE gexbench put

CSV (-csv): after the "# " header lines, the line
  bench,path,size,metric,value,unit
then one row per figure. bench: put, get, flood-put, flood-get, fadd-u64,
fadd-u32, fadd-flood-u64, vis-{vector,indexed,strided}-{put,get}, am-Short,
am-Medium, am-Long, barrier-Barrier, bcast-Broadcast, bcast-Broadcast-seg
(source in the root's segment), reduce-ReduceToAll, reduce-ReduceToOne; the references copy, move8 and xadd64 have path
local; the floors floor-pingpong (size 8), floor-flagbarrier (size 0) and
floor-copyecho (sizes 4096 and 65536) have path shm
(rows of am, barrier and floor; absent where rank 1's segment is not mapped).
size: bytes (0 for Short AMs and barriers). metric: avg, median, min
(latency, unit us), median, best (bandwidth MB/s; rates Mops/s), bw (the
collectives' bandwidth at the median time, MB/s). -plot FILE.svg draws the
medians (bw for collectives) against the size, log axes, one line per bench
and path, one file per unit (FILE-MBps.svg for the second); -compare adds the
rows of earlier -csv runs, labelled by file name.

The segment each rank attaches is large enough for the sweep, rounded up to a
page; raise GASNET_MAX_SEGSIZE if it does not fit. GEX_WAITMODE (spin, block,
spinblock) changes how rank 1 polls.

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
	plot       string      // -plot FILE.svg (plot.go)
	compare    string      // -compare A.csv,B.csv
	api        string      // "ex" or "gasnet1" (gasnet1.go)
	rounds     int         // tcplat: rounds (tcplat.go)
	floor      *floorStats // the floors measured in this run (floor.go)
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
	fs.IntVar(&cfg.minSize, "min", 8, "smallest size of the sweep in bytes (every power of two from -min to -max, and both ends)")
	fs.IntVar(&cfg.maxSize, "max", 4<<20, "largest size of the sweep in bytes")
	fs.BoolVar(&cfg.reuse, "reuse", false, "flood: every operation of a window uses the same local and remote bytes (as testlarge does; cache-resident)")
	fs.BoolVar(&cfg.csv, "csv", false, "print CSV rows bench,path,size,metric,value,unit instead of the table")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write rank 0's CPU profile of the measurements to this file (a name with %r: every rank's, %r replaced by the rank)")
	fs.IntVar(&cfg.rounds, "rounds", 5, "tcplat: rounds, each with its own raw floor")
	addPlotFlags(fs, &cfg)
	fs.StringVar(&cfg.api, "api", "ex", "ex, or gasnet1: put, get, am and barrier through the GASNet-1 layer beside the EX call it wraps (overhead column)")
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
	case !contains2(apis, cfg.api):
		return bad("-api %q: want one of %s", cfg.api, strings.Join(apis, ", "))
	case cfg.api == "gasnet1" && !contains2(g1Benches, cfg.bench):
		return bad("-api gasnet1 supports %s, not %q", strings.Join(g1Benches, ", "), cfg.bench)
	case cfg.iters < 0:
		return bad("-iters %d is negative", cfg.iters)
	case cfg.batches < 1:
		return bad("-batches %d must be at least 1", cfg.batches)
	case cfg.window < 1:
		return bad("-window %d must be at least 1", cfg.window)
	case cfg.reps < 0:
		return bad("-reps %d is negative", cfg.reps)
	case cfg.rounds < 1:
		return bad("-rounds %d must be at least 1", cfg.rounds)
	case cfg.samples < 1:
		return bad("-samples %d must be at least 1", cfg.samples)
	case cfg.minSize < 1 || cfg.maxSize < cfg.minSize:
		return bad("-min %d / -max %d: need 1 <= min <= max", cfg.minSize, cfg.maxSize)
	}
	if err := cfg.checkPlot(); err != nil {
		return bad("%v", err)
	}
	return cfg, nil
}

// startProfile starts the -cpuprofile profile, if asked for; stop ends it.
func (cfg *config) startProfile() (stop func(), err error) {
	if cfg.cpuprofile == "" || strings.Contains(cfg.cpuprofile, "%r") {
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

// startRankProfile starts rank me's profile when the -cpuprofile name holds
// %r (every rank profiles the measurements into its own file: the target's
// side of a put or get flood too); stop ends it.
func (cfg *config) startRankProfile(me gex.Rank) (stop func(), err error) {
	if !strings.Contains(cfg.cpuprofile, "%r") {
		return func() {}, nil
	}
	one := *cfg
	one.cpuprofile = strings.ReplaceAll(cfg.cpuprofile, "%r", strconv.Itoa(int(me)))
	return one.startProfile()
}

// benches are the benchmark names.
var benches = []string{"put", "get", "flood", "atomic", "am", "vis", "barrier", "bcast", "reduce", "rawtcp", "tcplat", "floor"}

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

// latencySizes are the sizes of the put and get benchmarks (8 B first: the
// testsmall figure).
var latencySizes = []int{8, 64, 512, 4 << 10}

// latencySizes are the sizes of the put and get sweep (sweep.go).
func (cfg *config) latencySizes() []int { return cfg.sizes() }

// floodSizes are the sizes of the flood sweep (sweep.go).
func (cfg *config) floodSizes() []int { return cfg.sizes() }

// segmentSize is the segment every rank attaches: room for the largest
// transfer and for a window of transfers, rounded up to a page.
func (cfg *config) segmentSize() uint64 {
	n := latencySizes[len(latencySizes)-1]
	if cfg.bench == "put" || cfg.bench == "get" {
		n = max(n, cfg.maxSize) // the put and get checks read the largest size
	}
	if cfg.bench == "vis" {
		n = max(n, visSpan)
	}
	if cfg.bench == "bcast" {
		n = max(n, 1<<20) // broadcasts from the root's segment
	}
	if cfg.bench == "am" {
		n = max(n, min(cfg.maxSize, 4<<20)) // the largest Long payloads
	}
	if cfg.floorsFor() {
		n = max(n, floorSegBytes) // the floors' words and the copy echo's buffers
	}
	if cfg.bench == "flood" || cfg.bench == "tcplat" {
		if cfg.bench == "tcplat" { // the floods of -max bytes, after the latency rows' bytes
			n = max(n, tlFloodOffset+span(cfg.maxSize, cfg.window))
		} else {
			for _, s := range cfg.floodSizes() {
				n = max(n, span(s, cfg.window))
			}
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
	if code, done := offline(args, stdout, stderr); done {
		return code
	}
	cfg, err := parseArgs(args, stderr)
	switch {
	case err == flag.ErrHelp:
		return 0
	case err != nil:
		return 2
	}
	if cfg.api == "gasnet1" {
		return runGASNet1(&cfg, stdout, stderr)
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
	var tl tlState
	if err := ep.RegisterHandlers(tlHandlers(&tl)); err != nil {
		return fail(err)
	}
	var am *amState
	if cfg.bench == "am" || cfg.bench == "tcplat" {
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
	if cfg.bench == "atomic" || cfg.bench == "tcplat" {
		// Collective: every rank creates the domains.
		if ads, err = newDomains(tm); err != nil {
			return fail(err)
		}
	}
	if err := barrier(); err != nil {
		return fail(err)
	}
	if cfg.floorsFor() {
		if cfg.floor, err = runFloors(&cfg, tm, seg, barrier); err != nil {
			return fail(err)
		}
	}

	// Rank 0 measures while every other rank polls in the barrier, so the
	// AM path's requests to rank 1 are served.
	stopProfile, err := cfg.startRankProfile(me)
	if err != nil {
		return fail(err)
	}
	var benchErr error
	switch {
	case cfg.collective():
		benchErr = measureColl(&cfg, c, tm, seg, stdout)
	case cfg.bench == "rawtcp":
		benchErr = rawTCP(&cfg, c, tm, &rawAddr, stdout)
	case cfg.bench == "tcplat":
		benchErr = tcpLat(&cfg, c, tm, seg, ads, am, &tl, &rawAddr, stdout)
		if benchErr != nil {
			// The other rank may wait in the schedule forever: say why now.
			fmt.Fprintf(stderr, "gexbench: rank %d: %v\n", me, benchErr)
		}
	case cfg.bench == "floor":
		benchErr = floorOnly(&cfg, c, tm, cfg.floor, stdout)
	case me == 0:
		benchErr = measure(&cfg, c, tm, seg, ads, am, stdout)
	}
	// No rank leaves while another may still need it to poll.
	err = barrier()
	stopProfile()
	if err != nil {
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
	b := &bench{cfg: cfg, c: c, tm: tm, local: seg.Bytes(), remote: peer.Owner, mapped: peer.Local != nil, otherHost: onOtherHost(c, 1)}
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
	long, _ := b.pathName()
	return cfg.output(res, c, tm, long, stdout)
}

// pathName names the path an RMA to rank 1 takes, for the table and the CSV
// (see pathNames).
func (b *bench) pathName() (long, short string) { return pathNames(b.mapped, b.otherHost) }

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

// durName spells nanoseconds as microseconds, the unit of every latency
// column (3 decimals: 1 ns; 4 below 10 ns).
func durName(ns float64) string {
	if ns < 10 {
		return strconv.FormatFloat(ns/1000, 'f', 4, 64) // sub-10 ns figures keep a tenth of a ns
	}
	return strconv.FormatFloat(ns/1000, 'f', 3, 64)
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
