package gex

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/conduit/smp"
	"github.com/gexgo/gexgo/internal/conduit/tcp"
)

// Environment variables read by ClientInit (documented in `gexrun --help`).
const (
	EnvWaitMode  = "GEX_WAITMODE"  // spin | block | spinblock
	EnvRcvThread = "GEX_RCVTHREAD" // 1 = run handlers on a receive goroutine
	EnvVerbose   = "GEX_VERBOSE"   // 1 = print non-fatal errors to stderr
	EnvConduit   = "GEX_CONDUIT"   // smp (default: every rank on this machine) or tcp (hosts over TCP, shared memory inside each)
)

// Client is an instance of the client interface to the library (gex_Client_t).
// Everything the spec calls process-global (gex_System_*) is reached from it,
// so several ranks can live in one process (the loop conduit).
type Client struct {
	cd    conduit.Conduit
	name  string
	flags Flags
	ep    *EP
	eps   epTable  // every endpoint by index (ep.go)
	pub   pubTable // peers' published segments (segment.go)
	tm    *TM
	cdata cdata

	rank, size int
	topo       *conduit.Topology
	nbrhd      []RankInfo
	nbrhdIdx   Rank
	host       []RankInfo
	hostIdx    Rank
	pos        Position

	// handlerG[q] is the goroutine running a handler delivered from inbound
	// queue q (0 requests, 1 replies), or 0. Each queue has one consumer at a
	// time, so one word per queue tracks every handler context of the client.
	handlerG [3]atomic.Uintptr // [2]: AMs released from the hold (refuse.go)
	prepareG gset              // goroutines between an AM Prepare and its Commit

	waitMode atomic.Int32
	// spinPolls is how many empty polls spin-then-block spends before
	// sleeping; polite (more ranks on this host than CPUs) spins briefly
	// and yields the CPU to other processes instead of the goroutine.
	spinPolls int
	polite    bool
	mates     cpuMates // polite waits: where the neighbourhood's ranks run (polite.go)
	verbose   atomic.Bool

	reqTok, repTok Token // reused per delivered AM (one consumer per queue at a time)
	rejected       atomic.Uint64
	rejectLog      atomic.Uint64 // rejections printed so far (rate limit)

	sdPool sync.Pool // *SrcDesc
	evPool sync.Pool // *eventState
	nbi    nbiState
	ops    opTable[rmaOp, *rmaOp] // path-(b) RMA operations in flight
	vis    visState               // VIS: path-(b) operations, peer-completion arming (vis.go, vis_am.go)
	coll   collEngine             // collectives (coll.go)

	warnedMin atomic.Bool // the deprecated SCRATCH_SIZE_MIN warning was printed

	atomicScratch [8]byte // fetched value of the atomic being answered (request handlers run one at a time)

	// segViews is every job rank's segment as seen here, built once by
	// SegmentAttach (nil before).
	segViews atomic.Pointer[[]segView]
	// mapped is the same, compacted for the fast paths (rma_fast_unsafe.go):
	// the first of c.size entries.
	mapped atomic.Pointer[mapEntry]
	// slowHook, if set (tests only, before the calls), is called with the
	// name of every RMA and atomic call that takes the general path.
	slowHook func(op string)

	done <-chan struct{} // in-process jobs: closed when the job ended

	// smp is cd when it is the smp conduit (AM headers go to it by
	// reference, am.go), or nil; ringsCount: it counts the AMs delivered
	// for the progress count (polled).
	smp        *smp.Conduit
	ringsCount bool
	// waiter is cd if it can serve a library wait by sleeping briefly
	// (smp with the tcp transport: PollWait), else nil; waits call it
	// unless the wait mode is WaitSpin (pollWait).
	waiter conduit.Waiter

	rcvWanted bool
	rcvStop   chan struct{}
	rcvDone   chan struct{}
	closed    atomic.Bool

	watch watchState // peers leaving, progress, waits (watch.go)
	held  holdState  // AMs that arrived before their handler (refuse.go)
}

// cdata is the client-data slot of the major objects (gex_*_SetCData).
type cdata struct{ p atomic.Pointer[any] }

func (d *cdata) set(v any) { d.p.Store(&v) }
func (d *cdata) get() any {
	if p := d.p.Load(); p != nil {
		return *p
	}
	return nil
}

var clientNameRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]+$`)

// Option configures ClientInit.
type Option func(*initConfig)

type initConfig struct {
	cd       conduit.Conduit
	waitMode *WaitMode
	rcv      *bool
}

// WithWaitMode sets the initial wait mode (default: GEX_WAITMODE, else
// WaitSpinBlock).
func WithWaitMode(m WaitMode) Option { return func(c *initConfig) { c.waitMode = &m } }

// WithReceiveGoroutine enables or disables the receive goroutine that runs AM
// handlers while the application computes (default: GEX_RCVTHREAD).
func WithReceiveGoroutine(on bool) Option { return func(c *initConfig) { c.rcv = &on } }

// ClientInit implements gex_Client_Init: it joins the job this process was
// started in (by gexrun, or a job of one rank when started alone) and returns
// the client, the primordial endpoint and the primordial team. It is
// collective over all ranks and ends with a barrier.
//
// name must match [A-Z][A-Z0-9_]+. Accepted flags: FlagUsesGASNet1,
// FlagDeferThreads (the receive goroutine, if enabled, is then started by
// StartProgressThreads).
func ClientInit(name string, flags Flags, opts ...Option) (*Client, *EP, *TM, error) {
	var cfg initConfig
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkClientArgs(name, flags); err != nil {
		return nil, nil, nil, err
	}
	cd := cfg.cd
	if cd == nil {
		b, err := boot.FromEnv()
		if err != nil {
			return nil, nil, nil, &Error{Op: "ClientInit", Code: ErrCodeNotInit, Msg: err.Error()}
		}
		scfg := smp.ConfigFromEnv()
		switch v := os.Getenv(EnvConduit); v {
		case "", "smp":
		case "tcp":
			tcfg, err := tcp.ConfigFromEnv(b.JobID())
			if err != nil {
				b.Abort(fmt.Sprintf("ClientInit: %v", err))
				return nil, nil, nil, &Error{Op: "ClientInit", Code: ErrCodeResource, Msg: err.Error()}
			}
			scfg.Remote = tcp.New(tcfg)
		default:
			err := fmt.Errorf("%s=%q: want smp or tcp", EnvConduit, v)
			b.Abort(fmt.Sprintf("ClientInit: %v", err))
			return nil, nil, nil, &Error{Op: "ClientInit", Code: ErrCodeBadArg, Msg: err.Error()}
		}
		cd, err = smp.New(b, scfg)
		if err != nil {
			b.Abort(fmt.Sprintf("ClientInit: %v", err))
			return nil, nil, nil, &Error{Op: "ClientInit", Code: ErrCodeResource, Msg: err.Error()}
		}
	}
	return clientInit(cd, name, flags, cfg)
}

func checkClientArgs(name string, flags Flags) error {
	if !clientNameRE.MatchString(name) {
		return badArg("ClientInit", "clientName %q does not match [A-Z][A-Z0-9_]+", name)
	}
	if bad := flags &^ (FlagUsesGASNet1 | FlagDeferThreads); bad != 0 {
		return badArg("ClientInit", "flags %v are not accepted (only GEX_FLAG_USES_GASNET1, GEX_FLAG_DEFER_THREADS)", bad)
	}
	return nil
}

func clientInit(cd conduit.Conduit, name string, flags Flags, cfg initConfig) (*Client, *EP, *TM, error) {
	c := &Client{cd: cd, name: name, flags: flags, rank: cd.Rank(), size: cd.Size(), topo: cd.Topology()}
	c.sdPool.New = func() any { return new(SrcDesc) }
	c.evPool.New = func() any { return new(eventState) }
	mode := WaitSpinBlock
	switch strings.ToLower(os.Getenv(EnvWaitMode)) {
	case "spin":
		mode = WaitSpin
	case "block":
		mode = WaitBlock
	}
	if cfg.waitMode != nil {
		mode = *cfg.waitMode
	}
	c.waitMode.Store(int32(mode))
	c.verbose.Store(os.Getenv(EnvVerbose) == "1")
	c.held.drop = os.Getenv(EnvAMRefuse) == "drop"
	c.rcvWanted = os.Getenv(EnvRcvThread) == "1"
	if cfg.rcv != nil {
		c.rcvWanted = *cfg.rcv
	}
	c.computeTopology()
	c.spinPolls = spinPolls
	if len(c.host) > hostCPUs() {
		// GASNet's "polite" mode for overcommitted nodes: a spinning rank
		// would hold a CPU that the rank it waits for needs.
		c.polite, c.spinPolls = true, politeSpinPolls
	} else if r, ok := cd.(interface{ HasRemote() bool }); ok && r.HasRemote() {
		// Ranks on other hosts: the tcp conduit reads its sockets on the
		// polling goroutine, so a wait keeps polling as long as a spinning
		// one before it sleeps (waking costs tens of us), but yields the
		// CPU between polls (sched_yield returns at once on an idle
		// machine, and lets the peer's process - and ksoftirqd, which
		// may carry the packets - run on a loaded one; yielding only
		// every 4th poll made the AM round trip between namespace
		// hosts slower here, min 10.7-11.3 us against 8.3-9.8).
		c.polite = true
	}
	if d, ok := cd.(interface{ Done() <-chan struct{} }); ok {
		c.done = d.Done()
	}

	c.ep = &EP{c: c, index: 0, caps: EPCapabilityAll}
	c.eps.all.Store(&[]*EP{c.ep})
	c.tm = &TM{c: c, ep: c.ep, rank: Rank(c.rank), size: Rank(c.size), id: primordialTeamID, direct: true}
	c.coll.init(c)
	c.tm.ts = c.coll.team(primordialTeamID)
	c.tm.ts.tm = c.tm
	c.coll.initShm() // before the barrier below: peers read line 0 after it
	c.initCPUMates()
	c.reqTok.c, c.repTok.c, c.held.tok.c = c, c, c
	for _, set := range [][]AMEntry{c.rmaHandlers(), c.collHandlers(), c.visHandlers(), c.memsetHandlers(), c.segHandlers()} {
		for _, e := range set {
			if old := c.ep.handlers[e.Index].Load(); old != nil {
				// Internal corruption: two library handlers share an index.
				panic(fmt.Sprintf("gex: library handlers %q and %q share index %d", old.Name, e.Name, e.Index))
			}
			c.ep.handlers[e.Index].Store(&e)
		}
	}
	c.smp, _ = cd.(*smp.Conduit)
	c.ringsCount = c.smp != nil && !c.smp.HasRemote()
	if c.smp == nil || c.smp.HasRemote() {
		c.waiter, _ = cd.(conduit.Waiter)
	}
	if o, ok := cd.(interface{ SetConsumerOwners(*[2]atomic.Uintptr) }); ok {
		o.SetConsumerOwners((*[2]atomic.Uintptr)(c.handlerG[:2])) // see run
	}
	cd.SetDelivery(c.deliver)
	c.startWatch(cfg.cd == nil) // a process rank unless the caller gave the conduit
	if err := cd.Barrier(); err != nil {
		return nil, nil, nil, &Error{Op: "ClientInit", Code: ErrCodeResource, Msg: "initial barrier: " + err.Error()}
	}
	if c.rcvWanted && flags&FlagDeferThreads == 0 {
		c.startReceiver()
	}
	return c, c.ep, c.tm, nil
}

func (c *Client) computeTopology() {
	t := c.topo
	myN, myH := t.Nbrhd[c.rank], t.Host[c.rank]
	for r := 0; r < c.size; r++ {
		if t.Nbrhd[r] == myN {
			if r == c.rank {
				c.nbrhdIdx = Rank(len(c.nbrhd))
			}
			c.nbrhd = append(c.nbrhd, RankInfo{JobRank: Rank(r)})
		}
		if t.Host[r] == myH {
			if r == c.rank {
				c.hostIdx = Rank(len(c.host))
			}
			c.host = append(c.host, RankInfo{JobRank: Rank(r)})
		}
	}
	c.pos = Position{
		NbrhdSetSize: Rank(conduit.Count(t.Nbrhd)), NbrhdSetRank: Rank(myN),
		HostSetSize: Rank(conduit.Count(t.Host)), HostSetRank: Rank(myH),
	}
}

// QueryFlags implements gex_Client_QueryFlags.
func (c *Client) QueryFlags() Flags { return c.flags }

// QueryName implements gex_Client_QueryName.
func (c *Client) QueryName() string { return c.name }

// SetCData implements gex_Client_SetCData.
func (c *Client) SetCData(v any) { c.cdata.set(v) }

// QueryCData implements gex_Client_QueryCData (nil for a new client).
func (c *Client) QueryCData() any { return c.cdata.get() }

// JobRank implements gex_System_QueryJobRank.
func (c *Client) JobRank() Rank { return Rank(c.rank) }

// JobSize implements gex_System_QueryJobSize.
func (c *Client) JobSize() Rank { return Rank(c.size) }

// QueryNbrhdInfo implements gex_System_QueryNbrhdInfo: the members of the
// caller's neighbourhood (processes whose segments are cross-mapped) sorted by
// job rank, and the caller's index among them. The slice is shared: do not
// modify it.
func (c *Client) QueryNbrhdInfo() (info []RankInfo, myIndex Rank) { return c.nbrhd, c.nbrhdIdx }

// QueryHostInfo implements gex_System_QueryHostInfo: as QueryNbrhdInfo for
// the caller's host.
func (c *Client) QueryHostInfo() (info []RankInfo, myIndex Rank) { return c.host, c.hostIdx }

// QueryMyPosition implements gex_System_QueryMyPosition.
func (c *Client) QueryMyPosition() Position { return c.pos }

// VerboseErrors implements gex_System_GetVerboseErrors.
func (c *Client) VerboseErrors() bool { return c.verbose.Load() }

// SetVerboseErrors implements gex_System_SetVerboseErrors.
func (c *Client) SetVerboseErrors(on bool) { c.verbose.Store(on) }

// QueryMaxThreads implements gex_System_QueryMaxThreads. gexgo places no limit
// on the number of goroutines that call into it.
func (c *Client) QueryMaxThreads() uint64 { return math.MaxUint64 }

// QueryHiddenAMConcurrencyLevel implements
// gex_System_QueryHiddenAMConcurrencyLevel: 1 if a receive goroutine may run
// handlers concurrently with the application, else 0.
func (c *Client) QueryHiddenAMConcurrencyLevel() int {
	if c.rcvWanted {
		return 1
	}
	return 0
}

// StartProgressThreads starts the receive goroutine when ClientInit was given
// FlagDeferThreads (gex_System_QueryProgressThreads and the start functions it
// returns, collapsed into one call). It is a no-op otherwise.
func (c *Client) StartProgressThreads() {
	if c.rcvWanted && c.rcvStop == nil {
		c.startReceiver()
	}
}

// SetWaitMode implements gasnet_set_waitmode.
func (c *Client) SetWaitMode(m WaitMode) error {
	if m != WaitSpin && m != WaitBlock && m != WaitSpinBlock {
		return badArg("SetWaitMode", "mode %d is not WaitSpin, WaitBlock or WaitSpinBlock", int(m))
	}
	c.waitMode.Store(int32(m))
	return nil
}

// WaitMode returns the current wait mode.
func (c *Client) WaitMode() WaitMode { return WaitMode(c.waitMode.Load()) }

// Poll implements gex_AM_Poll (gasnet_AMPoll): it runs the handlers of AMs that
// have arrived. Prohibited in handlers and while holding an HSL.
func (c *Client) Poll() error {
	if err := c.checkRestricted("Poll"); err != nil {
		return err
	}
	c.polled(c.cd.Poll(false))
	c.coll.progress()
	return nil
}

// BlockUntil polls until cond returns true, waiting in the client's wait mode
// (GASNET_BLOCKUNTIL). cond is evaluated between polls on the calling
// goroutine; handlers that make it true run inside BlockUntil (or on the
// receive goroutine).
func (c *Client) BlockUntil(cond func() bool) error { return c.blockUntil("BlockUntil", cond) }

// yield gives up the processor while spinning: to other goroutines, and when
// polite to other processes.
func (c *Client) yield() {
	if c.polite {
		sysYield()
	} else {
		runtime.Gosched()
	}
}

const (
	politeSpinPolls = 64
	spinPolls       = 2000                   // spin-then-block: empty polls before sleeping
	spinYieldEvery  = 512                    // spin-then-block, not polite: empty polls between Gosched calls
	sleepCap        = 200 * time.Microsecond // longest sleep before re-checking cond
	quickPolls      = 64                     // polls of a wait before it is recorded (beginWait)
)

// polled adds n AMs delivered by a Poll to the progress count, unless the
// conduit counts them itself (smp without a remote transport: the rings'
// heads, progressCount in watch.go), which saves an atomic add per poll.
func (c *Client) polled(n int) {
	if n > 0 && !c.ringsCount {
		c.watch.progress.Add(uint64(n))
	}
}

func (c *Client) blockUntil(op string, cond func() bool) error {
	return c.blockUntilEv(op, nil, cond)
}

// blockUntilEv is blockUntil recording that it waits for the operation of
// ev (nil: unknown), for --hang-timeout reports and error messages.
func (c *Client) blockUntilEv(op string, ev *eventState, cond func() bool) error {
	if c.mayBeRestricted() { // checkRestricted, its common case inlined
		if err := c.checkRestrictedSlow(op); err != nil {
			return err
		}
	}
	if cond() {
		return nil
	}
	// A wait that ends within a few polls (an AM round trip through shared
	// memory) is not recorded for the hang reports: that takes a lock twice.
	// A polite wait for a collective skips them: they do not advance it
	// (the loop below does), and the member it waits for may need this CPU.
	quick := quickPolls
	if c.polite && ev != nil && ev.coll != nil {
		quick = 0
	}
	for range quick {
		var n int
		if c.smp != nil {
			n = c.smp.Poll(false) // a direct call
		} else {
			n = c.cd.Poll(false)
		}
		if n > 0 {
			c.polled(n)
			if c.coll.pending() {
				c.coll.progress()
			}
		}
		if cond() {
			return nil
		}
	}
	c.beginWait(op, ev)
	defer c.endWait()
	idle, spins := 0, 0
	for !cond() {
		if n := c.pollWait(); n > 0 {
			c.polled(n)
			c.coll.progress()
			idle = 0
			continue
		}
		// Collectives advance first: a shared-memory one may complete
		// from flags a rank wrote before it left.
		if c.coll.progress(); cond() {
			continue
		}
		// Nothing more arrived: a rank that left fails the wait now
		// (what it sent before it left has been delivered).
		if err := c.faultErr(op); err != nil {
			return err
		}
		c.expireHeld()
		idle++
		if c.done != nil && idle%64 == 0 {
			select {
			case <-c.done: // an in-process job ended under us
				runtime.Goexit()
			default:
			}
		}
		switch WaitMode(c.waitMode.Load()) {
		case WaitSpin:
			if idle%64 == 0 {
				runtime.Gosched()
			}
		case WaitBlock:
			c.sleep(cond)
		default:
			if idle < c.spinPolls {
				// runtime.Gosched with an idle P wakes another thread
				// (futex), which then spins on the core the peer rank
				// needs: yield rarely unless polite (sched_yield), and
				// not while the ranks awaited run on other CPUs
				// (polite.go).
				switch {
				case c.polite && c.politeSpin(ev, &spins):
					idle-- // bounded by politeSpinMax
				case c.polite:
					c.yield()
					c.noteCPU() // the scheduler may have moved this rank
				case idle%spinYieldEvery == 0:
					c.yield()
				}
			} else {
				c.sleep(cond)
			}
		}
	}
	return nil
}

// pollWait is the poll of a library wait past its quick polls (and of the
// receive goroutine): in the block and spin-block wait modes ("yield CPU
// resources ... while waiting", gasnet_set_waitmode, spec 3.6.2.1) it may
// sleep briefly in the conduit (Waiter: the tcp transport while a large
// Long arrives, 2 ms at most); in the spin mode ("contend aggressively for
// CPU resources while waiting") it is the plain Poll, which never sleeps.
// The user's Poll (AMPoll) never comes here.
func (c *Client) pollWait() int {
	if c.waiter != nil && WaitMode(c.waitMode.Load()) != WaitSpin {
		return c.waiter.PollWait(false)
	}
	return c.cd.Poll(false)
}

func (c *Client) startReceiver() {
	c.rcvStop = make(chan struct{})
	c.rcvDone = make(chan struct{})
	go func() {
		defer close(c.rcvDone)
		idle := 0
		for {
			select {
			case <-c.rcvStop:
				return
			default:
			}
			if n := c.pollWait(); n > 0 {
				c.polled(n)
				c.coll.progress()
				idle = 0
				continue
			}
			c.coll.progress()
			idle++
			if idle < spinPolls/4 {
				runtime.Gosched()
			} else {
				c.cd.Sleep(sleepCap)
			}
		}
	}()
}

// Exit implements gasnet_exit: every rank of the job ends with code. Any rank
// may call it, from anywhere (including handlers). It does not return.
func (c *Client) Exit(code int) {
	c.cd.Exit(code)
}

// Close stops the receive goroutine and releases this rank's resources. It is
// not a spec call: returning from main (or os.Exit) does the same. After
// Close the client must not be used.
func (c *Client) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	if c.rcvStop != nil {
		close(c.rcvStop)
		<-c.rcvDone
	}
	c.stopWatch()
	return c.cd.Close()
}

// report prints err when verbose errors are on (gex_System_SetVerboseErrors:
// "console messages ... for certain non-fatal errors") and returns it.
// ErrNoOp is backpressure, not an error, and is never printed.
func (c *Client) report(err error) error {
	if err != nil && c.verbose.Load() && err != ErrNoOp {
		c.logf("%v", err)
	}
	return err
}

// logf prints a library message for this rank to stderr.
func (c *Client) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gexgo: rank %d: %s\n", c.rank, fmt.Sprintf(format, args...))
}
