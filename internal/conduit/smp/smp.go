// Package smp is the shared-memory conduit: every rank is a process on one
// machine (or, with the loop conduit, a goroutine), AMs travel through
// lock-free rings in shared memory, and every neighbourhood peer's segment is
// mapped into every process so a Long (and, above this package, RMA) is a
// single copy (GASNet's PSHM).
//
// # Layout
//
// Each rank creates one AM region and maps every other rank's:
//
//	0        region header: magic "GXAM", version, rank, size, state (offset 16: the rank ended the normal way), holder pid (20), fenced (24: fence.go)
//	64       Bell: the futex doorbell this rank sleeps on (block wait mode)
//	128      request ring: inbound AM requests (an shm.MsgRing: many producers, this rank consumes)
//	         (with its mailbox line, shm.MsgRing.ReserveMail: one-slot AMs
//	         go there first when it is empty)
//	...      reply ring: inbound AM replies
//	...      duo lines, one per job rank p: this rank's small requests to p
//	         and p's replies to them, one line for a round trip (duo.go)
//	...      pools, two per job rank p (requests to p, replies to p): payload
//	         buffers this rank fills for p and p frees after the handler ran
//
// Medium payloads up to 128 bytes (and Long payloads to peers whose segment is
// not mapped) travel inline in the ring message, which spans as many 64-byte
// slots as they need: one copy into the ring, and the handler reads them in
// place. Larger ones use a pool buffer of the sender (one copy too), as do
// the payloads of negotiated-payload AMs (Prepare/Commit), which the client
// fills before the message exists. Long payloads to mapped peers are copied
// straight into the destination segment before the message is committed.
//
// # Flow control
//
// A sender that finds the destination ring full or its pool exhausted polls
// while it waits: a request sender polls everything, a reply sender (inside a
// request handler) polls only its reply ring. Reply handlers never send, so
// reply rings always drain and no cycle of waiting senders can form. Buffers
// are allocated before a message is reserved, and an inline payload (at most
// 128 bytes) is copied between reserve and commit, so a reserved message is
// always committed promptly and never blocks the consumer behind a wait. The
// consumer frees ring space once per drain (shm.MsgRing.Publish), after the
// handlers it ran: a sender may find the ring full while a drain is under
// way, and polls meanwhile like any other sender.
//
// # Handler context
//
// Each inbound ring has one consumer at a time: the goroutine whose
// gctx.ID is in own[qi] (taken by a CAS from 0). The client hands in its
// handler-context words as own (SetConsumerOwners), so the consumer lock
// also says which goroutine runs that ring's handlers, and a handler runs
// without a store before and after it. With a Remote transport the rings
// are drained under the class mutex too, which Remote takes around its own
// handlers.
package smp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/gctx"
	"github.com/gexgo/gexgo/internal/memcopy"
	"github.com/gexgo/gexgo/internal/shm"
)

// Geometry of the AM region.
const (
	regionMagic   = 0x4d415847 // "GXAM" little-endian
	regionVersion = 6          // 4: the duo lines (duo.go); 5: offDuo; 6: the bulk timing (bulk.go)
	offBell       = 64
	offRings      = 128

	ringSlots   = 4096 // 64-byte slots: 256 KiB per ring, 4096 Shorts
	poolBufs    = 4
	poolBufSize = 64 << 10

	// MaxMedium is the Medium payload limit between any two ranks.
	MaxMedium = poolBufSize
	// MaxLongMapped is the Long payload limit between ranks whose segments are
	// cross-mapped (the payload is one copy into the mapping).
	MaxLongMapped = 4 << 20
	// MaxLongUnmapped is the Long payload limit otherwise (a pool buffer).
	MaxLongUnmapped = poolBufSize

	pollBudget = 256 // AMs delivered per ring per Poll
)

// EnvSupernodeMaxSize is GASNet's GASNET_SUPERNODE_MAXSIZE: the largest number
// of ranks in a neighbourhood (0 = unlimited). 1 makes every peer non-nbrhd, so
// no segment is cross-mapped and RMA takes the AM path.
const EnvSupernodeMaxSize = "GASNET_SUPERNODE_MAXSIZE"

// Config configures a Conduit.
type Config struct {
	// Allocator creates and maps shared regions: shm.Memfd{} for processes, a
	// shared *shm.Heap for ranks that are goroutines of one process.
	Allocator shm.Allocator
	// SupernodeMaxSize limits the neighbourhood size (0 = the whole host).
	SupernodeMaxSize int
	// NoDuo turns the duo lines off (duo.go; EnvNoDuo): every AM takes
	// the rings.
	NoDuo bool
	// CPUs is the number of CPUs the duo lines' rule counts (duoSends;
	// 0: runtime.NumCPU()).
	CPUs int
	// MaxSegSize is a GASNET_MAX_SEGSIZE value ("" = conduit.DefaultMaxSegSize).
	MaxSegSize string
	// Done, if set, is closed when the job ends while this rank may still be
	// waiting (in-process jobs: a rank goroutine called Exit). Waits for send
	// resources then end the calling goroutine (runtime.Goexit).
	Done <-chan struct{}
	// Remote, if set, carries AMs to the ranks on other hosts (the tcp
	// conduit); without it every rank must be on this machine (other host
	// identities are pretend hosts). It must be set on every rank or on none
	// (its Start is collective).
	Remote Remote
}

// Remote is a transport to the ranks on other hosts. The smp conduit keeps
// the ranks of this host on shared memory and hands everything addressed to
// another host to Remote; what Remote receives it delivers inside Poll, like
// the rings' AMs (a Long from another host arrives unplaced: the receiver
// validates it before placing the bytes).
type Remote interface {
	// Start connects to the ranks on other hosts (remote[r] is true for
	// them). It is collective over all ranks (it may use b's AllGather).
	// wake must be called when an AM arrives, so that Sleep returns.
	// place returns where a Long's n bytes for Dest go in this rank's
	// segment, or nil if they are not inside it (then the Long is delivered
	// unplaced and the receiver refuses it); the transport may read a Long
	// straight into that memory and deliver it placed.
	Start(b boot.Bootstrap, remote []bool, wake func(), place func(dest uint64, n int) []byte) error
	// Send injects an AM to remote rank dst (Conduit.Send's contract,
	// including ErrWouldBlock under Immediate).
	Send(dst int, h conduit.Header, payload []byte, flags conduit.SendFlags) error
	// Poll delivers arrived AMs through d (only Replies if repliesOnly)
	// and returns how many. It never blocks, and never sleeps: it is the
	// user's AMPoll, a sender's wait for room and a wait in the spin wait
	// mode ("contend aggressively for CPU resources while waiting",
	// gasnet_set_waitmode, spec 3.6.2.1); a library wait that may sleep
	// calls RemoteWaiter.PollWait instead, if Remote has it. Before running a handler it
	// takes (TryLock) the conduit's lock of that AM's class, given by
	// SetClassLocks, so that the handlers of a class never run on two
	// goroutines at once, whichever transport brought them (the client
	// keeps one token per class); an AM whose class lock is held elsewhere
	// waits for a later Poll.
	Poll(repliesOnly bool, d conduit.Delivery) int
	// SetClassLocks gives, before any traffic, the locks that guard the
	// delivery of each class: [0] Requests, [1] Replies.
	SetClassLocks(locks *[2]sync.Mutex)
	// Pending reports whether Poll would deliver something.
	Pending() bool
	// SetDelivery gives the handler dispatcher (the conduit's), before any
	// traffic: a sender waiting for room runs handlers through it.
	SetDelivery(d conduit.Delivery)
	// Arm is called before the rank sleeps (Sleep): wake must be called
	// once an AM arrives from now on.
	Arm()
	// Limits are the AM payload limits to a remote rank.
	Limits() conduit.Limits
	// Close ends the connections.
	Close() error
}

// RemoteWaiter is implemented by a Remote that can serve a library wait
// better by sleeping briefly in the kernel (the tcp transport while a large
// Long arrives: the rest of its bytes are on their way).
type RemoteWaiter interface {
	// PollWait is Poll for a wait of the library in the block or spin-block
	// wait mode ("yield CPU resources ... while waiting", gasnet_set_waitmode,
	// spec 3.6.2.1): it may sleep until arrived bytes let it deliver, for a
	// bounded time (the tcp transport: 2 ms at most), and otherwise keeps
	// Poll's contract.
	PollWait(repliesOnly bool, d conduit.Delivery) int
}

// ConfigFromEnv returns the configuration for a process rank: memfd regions,
// GASNET_SUPERNODE_MAXSIZE and GASNET_MAX_SEGSIZE from the environment.
func ConfigFromEnv() Config {
	cfg := Config{Allocator: shm.Memfd{}, MaxSegSize: os.Getenv(conduit.EnvMaxSegSize), NoDuo: os.Getenv(EnvNoDuo) == "1"}
	if v := os.Getenv(EnvSupernodeMaxSize); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil && n >= 0 {
			cfg.SupernodeMaxSize = n
		} else {
			fmt.Fprintf(os.Stderr, "gexgo: ignoring %s=%q: not a non-negative integer\n", EnvSupernodeMaxSize, v)
		}
	}
	return cfg
}

type peer struct {
	region *shm.Region
	ring   [2]*shm.MsgRing // [0] their request ring, [1] their reply ring: we produce
	bell   shm.Bell
	out    [2]*shm.Pool // our pools for sending to them (in our region)
	in     [2]*shm.Pool // their pools for sending to us (in their region): we free
	seg    conduit.SegInfo
	segReg *shm.Region
	mapped bool // same nbrhd: their segment is (to be) mapped here
	remote bool // another host: AMs go through Config.Remote

	// The duo lines (duo.go), used if duoOK: duoOut carries our requests
	// to them and their replies (our region's line), duoIn theirs to us and
	// our replies (their region's line). askClaim is our request senders'
	// lock on duoOut; answerDone is the lap+1 of the last reply our reply
	// consumer delivered from duoOut (0: none yet).
	duoOK      bool
	duoOut     shm.Duo
	duoIn      shm.Duo
	askClaim   atomic.Uint32
	answerDone atomic.Uint32
}

// Conduit is the shared-memory conduit for one rank.
type Conduit struct {
	b     boot.Bootstrap
	cfg   Config
	rank  int
	size  int
	topo  conduit.Topology
	peers []peer

	mine    *shm.Region
	inbound [2]*shm.MsgRing // my request and reply rings
	bell    shm.Bell

	consumer [2]sync.Mutex // one consumer per class, shared with Remote (pollWithRemote)
	// remoteWait is Config.Remote if it implements RemoteWaiter, else nil.
	remoteWait RemoteWaiter
	// own[qi] is the goroutine (gctx.ID) consuming inbound ring qi, or 0:
	// taking it (a CAS from 0) is the ring's consumer lock. The client
	// may hand in its own words (SetConsumerOwners), which then also say,
	// for free, which goroutine runs that ring's handlers.
	own    *[2]atomic.Uintptr
	ownBuf [2]atomic.Uintptr

	inc     [2]conduit.Incoming
	deliver conduit.Delivery

	hasWork func() bool // for Bell.Sleep; built once so Sleep does not allocate
	fenced  bool        // this process uses membarrier: fence.go

	segMu  sync.Mutex
	seg    *shm.Region
	ownSeg atomic.Pointer[conduit.SegInfo] // this rank's segment, for Remote's goroutines

	closeOnce sync.Once

	// duoPeers[0] are the peers that send requests here through duo lines
	// (duo.go: their region header's offDuo), duoPeers[1] the peers this
	// rank sends requests to through them (whose replies come back there).
	// duoCur is the peer whose duo request the request consumer is
	// delivering (-1 none) and duoBuf a copy of its payload; both belong to
	// the goroutine that holds own[0].
	duoPeers [2][]int
	duoCur   int
	duoBuf   [shm.DuoBytes]byte
	// outside[qi] counts the AMs of class qi consumed outside the ring's
	// slots (duo lines and the mailbox), which the ring's head does not
	// count (RecvTraffic); written by the class's consumer only.
	outside [2]atomic.Uint64

	live liveness // peers that leave the job early (liveness.go)
	// ntFrom is the length from which pooled payloads to other processes
	// go with non-temporal stores (bulk.go: ntFromNow), 0 until the
	// host's timing is known here.
	ntFrom atomic.Int32
	coll   [][]byte // collective areas by rank (coll.go)
}

var _ conduit.Conduit = (*Conduit)(nil)

func regionBytes(size int) (rings, pools, total int) {
	pb := shm.PoolBytes(poolBufs, poolBufSize)
	rings = offRings
	pools = align64(duoLines(rings) + size*shm.DuoBytes)
	return rings, pools, pools + 2*size*pb
}

// duoLines is the offset of the region's duo lines (duo.go), one per job
// rank, after the rings at offset rings.
func duoLines(rings int) int { return align64(rings + 2*shm.MsgRingBytes(ringSlots)) }

func align64(n int) int { return (n + 63) &^ 63 }

// New sets up the conduit for the rank b describes: it exchanges host
// identities, creates this rank's AM region, maps every peer's, and ends with
// a barrier. It is collective over all ranks.
func New(b boot.Bootstrap, cfg Config) (*Conduit, error) {
	if cfg.Allocator == nil {
		cfg.Allocator = shm.Memfd{}
	}
	c := &Conduit{b: b, cfg: cfg, rank: b.Rank(), size: b.Size()}
	c.own = &c.ownBuf
	c.hasWork = func() bool { return c.ringWaiting(0) || c.ringWaiting(1) || c.duoWaiting(0) || c.duoWaiting(1) }
	if err := c.exchangeTopology(); err != nil {
		return nil, err
	}
	if err := c.setupRegions(); err != nil {
		return nil, err
	}
	if err := c.setupColl(); err != nil { // coll.go
		return nil, err
	}
	if r := cfg.Remote; r != nil {
		remote := make([]bool, c.size)
		for p := range remote {
			remote[p] = c.peers[p].remote
		}
		if err := r.Start(b, remote, c.bell.Ring, c.placeRemote); err != nil {
			return nil, err
		}
		c.remoteWait, _ = r.(RemoteWaiter)
		c.hasWork = func() bool {
			return c.ringWaiting(0) || c.ringWaiting(1) || c.duoWaiting(0) || c.duoWaiting(1) || r.Pending()
		}
	}
	return c, nil
}

func (c *Conduit) exchangeTopology() error {
	hosts, err := c.b.AllGather([]byte(c.b.Host()))
	if err != nil {
		return fmt.Errorf("smp: exchanging host identities: %w", err)
	}
	if len(hosts) != c.size {
		return fmt.Errorf("smp: all-gather returned %d entries for %d ranks", len(hosts), c.size)
	}
	c.topo.Host = make([]int, c.size)
	c.topo.Nbrhd = make([]int, c.size)
	hostIdx := map[string]int{}
	perHost := map[int]int{} // host -> members seen so far
	nbrhdOf := map[[2]int]int{}
	for r, h := range hosts {
		hi, ok := hostIdx[string(h)]
		if !ok {
			hi = len(hostIdx)
			hostIdx[string(h)] = hi
		}
		c.topo.Host[r] = hi
		local := perHost[hi]
		perHost[hi]++
		chunk := 0
		if c.cfg.SupernodeMaxSize > 0 {
			chunk = local / c.cfg.SupernodeMaxSize
		}
		key := [2]int{hi, chunk}
		ni, ok := nbrhdOf[key]
		if !ok {
			ni = len(nbrhdOf)
			nbrhdOf[key] = ni
		}
		c.topo.Nbrhd[r] = ni
	}
	myHostRanks := perHost[c.topo.Host[c.rank]]
	spec := c.cfg.MaxSegSize
	if spec == "" {
		spec = conduit.DefaultMaxSegSize
	}
	maxSeg, err := conduit.ParseSegSize(spec, physMem(), myHostRanks)
	if err != nil {
		return err
	}
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], maxSeg)
	all, err := c.b.AllGather(buf[:])
	if err != nil {
		return fmt.Errorf("smp: exchanging segment limits: %w", err)
	}
	c.topo.MaxSeg = make([]uint64, c.size)
	for r, v := range all {
		if len(v) != 8 {
			return fmt.Errorf("smp: rank %d sent a %d-byte segment limit", r, len(v))
		}
		c.topo.MaxSeg[r] = binary.LittleEndian.Uint64(v)
	}
	return nil
}

func physMem() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 1 << 30
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}

func (c *Conduit) setupRegions() error {
	ringsOff, poolsOff, total := regionBytes(c.size)
	reg, err := c.cfg.Allocator.Create("gexgo-am-"+strconv.Itoa(c.rank), total)
	if err != nil {
		return fmt.Errorf("smp: creating the AM region (%d bytes): %w", total, err)
	}
	c.mine = reg
	b := reg.Bytes()
	binary.LittleEndian.PutUint32(b[0:], regionMagic)
	binary.LittleEndian.PutUint32(b[4:], regionVersion)
	binary.LittleEndian.PutUint32(b[8:], uint32(c.rank))
	binary.LittleEndian.PutUint32(b[12:], uint32(c.size))
	binary.LittleEndian.PutUint32(b[offHolder:], uint32(boot.HolderPID(c.b)))
	rb := shm.MsgRingBytes(ringSlots)
	for i := 0; i < 2; i++ {
		q, err := shm.InitMsgRing(b[ringsOff+i*rb:ringsOff+(i+1)*rb], ringSlots)
		if err != nil {
			return fmt.Errorf("smp: %w", err)
		}
		c.inbound[i] = q
	}
	c.bell = shm.BellAt(b, offBell)
	c.setupFence(b) // fence.go
	c.peers = make([]peer, c.size)
	pb := shm.PoolBytes(poolBufs, poolBufSize)
	for p := 0; p < c.size; p++ {
		for i := 0; i < 2; i++ {
			off := poolsOff + (2*p+i)*pb
			pool, err := shm.InitPool(b[off:off+pb], poolBufs, poolBufSize)
			if err != nil {
				return fmt.Errorf("smp: %w", err)
			}
			c.peers[p].out[i] = pool
		}
		c.peers[p].mapped = c.topo.Nbrhd[p] == c.topo.Nbrhd[c.rank]
		// Without a Remote transport, ranks with other host identities
		// (GEX_HOST, pretend hosts) are still on this machine and reached
		// through shared memory.
		c.peers[p].remote = c.cfg.Remote != nil && c.topo.Host[p] != c.topo.Host[c.rank]
	}
	c.duoCur = -1
	local := 0
	for p := range c.peers {
		if !c.peers[p].remote {
			local++
		}
	}
	cpus := c.cfg.CPUs
	if cpus <= 0 {
		cpus = runtime.NumCPU()
	}
	if duoSends(c.cfg.NoDuo, local, cpus) {
		shm.Uint32At(b, offDuo).Store(1)
		for p := range c.peers {
			if p != c.rank && !c.peers[p].remote {
				c.peers[p].duoOK = true
				c.duoPeers[1] = append(c.duoPeers[1], p)
			}
		}
	}
	if c.bulkWanted(local, cpus) { // bulk.go
		shm.Uint32At(b, offBulkAsk).Store(1)
	}
	desc, err := reg.Desc().MarshalBinary()
	if err != nil {
		return err
	}
	descs, err := c.b.AllGather(desc)
	if err != nil {
		return fmt.Errorf("smp: exchanging AM regions: %w", err)
	}
	pids := make([]int, c.size)
	for p := 0; p < c.size; p++ {
		if c.peers[p].remote {
			continue // no shared memory with another host
		}
		if err := c.mapPeer(p, descs[p], ringsOff, poolsOff, total); err != nil {
			return fmt.Errorf("smp: mapping rank %d's AM region: %w", p, err)
		}
		var d shm.Desc
		if d.UnmarshalBinary(descs[p]) == nil && d.Kind == shm.DescMemfd {
			pids[p] = int(d.PID)
		}
	}
	if err := c.b.Barrier(); err != nil {
		return fmt.Errorf("smp: barrier after mapping AM regions: %w", err)
	}
	c.watchPeers(pids)
	c.calibrateBulk() // bulk.go
	return nil
}

func (c *Conduit) mapPeer(p int, descBytes []byte, ringsOff, poolsOff, total int) error {
	pr := &c.peers[p]
	var reg *shm.Region
	if p == c.rank {
		reg = c.mine
	} else {
		var d shm.Desc
		if err := d.UnmarshalBinary(descBytes); err != nil {
			return err
		}
		if d.Size < uint64(total) {
			return fmt.Errorf("region of %d bytes is smaller than the %d expected", d.Size, total)
		}
		r, err := c.cfg.Allocator.Open(d)
		if err != nil {
			return err
		}
		reg = r
	}
	pr.region = reg
	b := reg.Bytes()
	if binary.LittleEndian.Uint32(b[0:]) != regionMagic || binary.LittleEndian.Uint32(b[4:]) != regionVersion {
		return errors.New("bad magic or version in the AM region header")
	}
	if int(binary.LittleEndian.Uint32(b[8:])) != p || int(binary.LittleEndian.Uint32(b[12:])) != c.size {
		return fmt.Errorf("AM region header names rank %d of %d", binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:]))
	}
	rb := shm.MsgRingBytes(ringSlots)
	for i := 0; i < 2; i++ {
		q, err := shm.AttachMsgRing(b[ringsOff+i*rb : ringsOff+(i+1)*rb])
		if err != nil {
			return err
		}
		pr.ring[i] = q
	}
	pr.bell = shm.BellAt(b, offBell)
	lines := duoLines(ringsOff)
	pr.duoOut = shm.DuoAt(c.mine.Bytes(), lines+p*shm.DuoBytes)
	pr.duoIn = shm.DuoAt(b, lines+c.rank*shm.DuoBytes)
	if p != c.rank && shm.Uint32At(b, offDuo).Load() == 1 {
		c.duoPeers[0] = append(c.duoPeers[0], p) // it may ask us through its line
	}
	c.attachFence(pr, b) // fence.go
	pb := shm.PoolBytes(poolBufs, poolBufSize)
	for i := 0; i < 2; i++ {
		off := poolsOff + (2*c.rank+i)*pb
		pool, err := shm.AttachPool(b[off : off+pb])
		if err != nil {
			return err
		}
		pr.in[i] = pool
	}
	return nil
}

// Rank implements conduit.Conduit.
func (c *Conduit) Rank() int { return c.rank }

// Size implements conduit.Conduit.
func (c *Conduit) Size() int { return c.size }

// Topology implements conduit.Conduit.
func (c *Conduit) Topology() *conduit.Topology { return &c.topo }

// Limits implements conduit.Conduit: symmetric, since the nbrhd relation is.
func (c *Conduit) Limits(p int) conduit.Limits {
	if c.peers[p].remote {
		return c.cfg.Remote.Limits()
	}
	if c.peers[p].mapped {
		return conduit.Limits{MaxMedium: MaxMedium, MaxLong: MaxLongMapped, MaxAlloc: poolBufSize}
	}
	return conduit.Limits{MaxMedium: MaxMedium, MaxLong: MaxLongUnmapped, MaxAlloc: poolBufSize}
}

// SetDelivery implements conduit.Conduit.
func (c *Conduit) SetDelivery(d conduit.Delivery) {
	c.deliver = d
	if c.cfg.Remote != nil {
		c.cfg.Remote.SetClassLocks(&c.consumer)
		c.cfg.Remote.SetDelivery(d)
	}
}

// SetConsumerOwners makes w the words that name the goroutine consuming
// each inbound ring ([0] requests, [1] replies), instead of the conduit's
// own. While a goroutine drains ring qi, w[qi] holds its gctx.ID, between
// handlers too; the client reads them as its handler-context words and need
// not write them around every handler. Call it before any traffic.
func (c *Conduit) SetConsumerOwners(w *[2]atomic.Uintptr) { c.own = w }

func qidx(isReq bool) int {
	if isReq {
		return 0
	}
	return 1
}

// maxInline is the largest payload carried inline in a ring message; larger
// ones (Medium, or Long to an unmapped peer) travel in a pool buffer.
// Measured (gexbench am, 2 ranks, interleaved with the old code): a payload
// in the message's only slot (up to 32 bytes with no args) makes the Medium
// round trip as fast as a Short's, 0.37 against 0.55-0.60 us; at 64 bytes
// (two slots) inline is a little faster, at 128 (three) a little slower
// than before (the old 256-byte slot) but faster than a pool buffer; from
// 256 bytes to 4 KiB inline was 5-15% slower than the pool buffer, whose
// lines are reused every 4 messages and stay shared in both caches.
const maxInline = 128

// Send implements conduit.Conduit.
func (c *Conduit) Send(dst int, h conduit.Header, payload []byte, flags conduit.SendFlags) error {
	return c.SendRef(dst, &h, payload, flags)
}

// SendRef is Send with the header passed by reference: the client builds
// it in place and the conduit encodes it from there, without copying its
// 100-odd bytes through the call (a copy that also stalls on the header's
// freshly written byte fields). h is not retained.
func (c *Conduit) SendRef(dst int, h *conduit.Header, payload []byte, flags conduit.SendFlags) error {
	pr := &c.peers[dst]
	if pr.remote {
		return c.cfg.Remote.Send(dst, *h, payload, flags)
	}
	qi := qidx(h.IsReq)
	n := len(payload)
	buf := -1
	var kind byte
	size := argsEnd(int(h.NArgs))
	switch {
	case h.Cat == conduit.Short:
		n = 0
	case h.Cat == conduit.Long && pr.mapped && h.EP == 0: // other endpoints' segments: gex places
		if n > 0 {
			local := pr.seg.Local
			off := h.Dest - pr.seg.Owner
			if local == nil || h.Dest < pr.seg.Owner || off > uint64(len(local)) || uint64(n) > uint64(len(local))-off {
				return fmt.Errorf("smp: Long destination [%#x, +%d) is outside rank %d's segment", h.Dest, n, dst)
			}
			c.copyTo(dst, local[off:], payload)
		}
		kind = kindPlaced
	case n <= maxInline:
		kind = kindInline
		size = payloadOff(int(h.NArgs)) + n
	default:
		if n > poolBufSize {
			return fmt.Errorf("smp: payload of %d bytes exceeds the %d-byte buffer", n, poolBufSize)
		}
		pool := pr.out[qi]
		// A payload copied with cached stores goes into the buffer the
		// last message used (Pool.TryAllocHot: its lines are still in
		// both caches); one copied with non-temporal stores (from the
		// length the host's timing chose: bulk.go) into the next one
		// round robin (docs/am.md, "Medium copies, third pass").
		// (The loop is written out here and in sendMediumPooled: a
		// helper for it does not inline and cost ~4 ns per message.)
		hot := n < c.ntFromNow() || dst == c.rank
		for w := 0; ; w++ {
			var idx int
			var b []byte
			var ok bool
			if hot {
				idx, b, ok = pool.TryAllocHot()
			} else {
				idx, b, ok = pool.TryAlloc()
			}
			if ok {
				c.copyMedium(dst, b, payload, h.IsReq, hot)
				buf = idx
				break
			}
			if flags&conduit.Immediate != 0 {
				return conduit.ErrWouldBlock
			}
			c.backoff(h.IsReq, w)
		}
	}
	q := pr.ring[qi]
	data, ticket, ok := q.Reserve(size)
	if !ok {
		var err error
		if data, ticket, err = c.reserveWait(q, size, h.IsReq, flags); err != nil {
			if buf >= 0 {
				_ = pr.out[qi].Free(buf)
			}
			return err
		}
	}
	encodeSlot(data, h, c.rank, n, buf, kind)
	if kind == kindInline {
		copy(data[payloadOff(int(h.NArgs)):], payload)
	}
	q.Commit(ticket)
	pr.bell.Ring()
	return nil
}

// reserveWait is the senders' wait for room in ring q after a first
// Reserve of n bytes failed: ErrWouldBlock under Immediate, else back off
// (polling this class: see backoff) and try again until there is room.
// Out of line: the first Reserve, at the call sites, is the common case.
func (c *Conduit) reserveWait(q *shm.MsgRing, n int, isReq bool, flags conduit.SendFlags) ([]byte, shm.Ticket, error) {
	for w := 0; ; w++ {
		if flags&conduit.Immediate != 0 {
			return nil, shm.Ticket{}, conduit.ErrWouldBlock
		}
		c.backoff(isReq, w)
		if data, ticket, ok := q.Reserve(n); ok {
			return data, ticket, nil
		}
	}
}

// SendShort is Send for a Short AM, with the header's fields as arguments:
// it encodes them straight into the ring message (one 64-byte slot for up
// to 8 args) without building a conduit.Header first. len(args) <=
// conduit.MaxArgs (the caller checked it).
func (c *Conduit) SendShort(dst int, isReq bool, handler uint8, ep, srcEP uint16, args []int32, flags conduit.SendFlags) error {
	pr := &c.peers[dst]
	if pr.remote || len(args) > conduit.MaxArgs {
		return c.sendShortHeader(dst, isReq, handler, ep, srcEP, args, flags)
	}
	// The duo line first (duo.go), then the destination's mailbox, for a
	// Short of up to 8 args (one slot each): AMs need no order among themselves
	// (docs/am.md, "Fourth pass: the ring's lines").
	if pr.duoOK && len(args) <= duoArgs {
		if isReq {
			if c.duoAsk(pr, byte(conduit.Short), handler, ep, srcEP, args, nil, 0) {
				return nil
			}
		} else if c.duoAnswer(pr, dst, byte(conduit.Short), handler, ep, srcEP, args, nil, 0) {
			return nil
		}
	}
	q := pr.ring[qidx(isReq)]
	if argsEnd(len(args)) <= shm.MailData {
		if data, ok := q.ReserveMail(); ok {
			encodeShort(data, isReq, handler, ep, srcEP, c.rank, args)
			q.CommitMail()
			pr.bell.Ring()
			return nil
		}
	}
	data, ticket, ok := q.Reserve(argsEnd(len(args)))
	if !ok {
		var err error
		if data, ticket, err = c.reserveWait(q, argsEnd(len(args)), isReq, flags); err != nil {
			return err
		}
	}
	encodeShort(data, isReq, handler, ep, srcEP, c.rank, args)
	q.Commit(ticket)
	pr.bell.Ring()
	return nil
}

// MaxInline is the largest Medium payload SendMedium carries in the ring
// message itself.
const MaxInline = maxInline

// SendMedium is Send for a Medium, with the header's fields as arguments:
// to a peer on this host, a payload of at most MaxInline bytes is encoded
// with them straight into the ring message, and a larger one, up to
// MaxMedium, goes into a pool buffer (sendMediumPooled), in both cases
// without a conduit.Header; anything else goes through SendRef.
// len(args) <= conduit.MaxArgs (the caller checked it, and the payload
// against Limits).
func (c *Conduit) SendMedium(dst int, isReq bool, handler uint8, ep, srcEP uint16, args []int32, payload []byte, flags conduit.SendFlags) error {
	pr := &c.peers[dst]
	if pr.remote || len(args) > conduit.MaxArgs || len(payload) > poolBufSize {
		h := conduit.Header{Cat: conduit.Medium, IsReq: isReq, Handler: handler, NArgs: uint8(len(args)), EP: ep, SrcEP: srcEP}
		copy(h.Args[:], args)
		return c.SendRef(dst, &h, payload, flags)
	}
	if len(payload) > maxInline {
		return c.sendMediumPooled(pr, dst, isReq, handler, ep, srcEP, args, payload, flags)
	}
	k := byte(conduit.Medium) | kindInline
	if isReq {
		k |= kindReq
	}
	if pr.duoOK && duoFits(conduit.Medium, len(args), len(payload)) { // as in SendShort
		if isReq {
			if c.duoAsk(pr, k, handler, ep, srcEP, args, payload, 0) {
				return nil
			}
		} else if c.duoAnswer(pr, dst, k, handler, ep, srcEP, args, payload, 0) {
			return nil
		}
	}
	q := pr.ring[qidx(isReq)]
	po := payloadOff(len(args))
	if po+len(payload) <= shm.MailData { // as in SendShort
		if data, ok := q.ReserveMail(); ok {
			encodeFields(data, k, handler, ep, srcEP, c.rank, len(payload), -1, args)
			copy(data[po:], payload)
			q.CommitMail()
			pr.bell.Ring()
			return nil
		}
	}
	data, ticket, ok := q.Reserve(po + len(payload))
	if !ok {
		var err error
		if data, ticket, err = c.reserveWait(q, po+len(payload), isReq, flags); err != nil {
			return err
		}
	}
	encodeFields(data, k, handler, ep, srcEP, c.rank, len(payload), -1, args)
	copy(data[po:], payload)
	q.Commit(ticket)
	pr.bell.Ring()
	return nil
}

// sendMediumPooled is SendMedium for a payload of (MaxInline, MaxMedium]
// bytes to pr, a peer on this host: SendRef's pool-buffer case (the same
// buffer choice, copy, reservation and Immediate handling) with the
// message encoded from the fields (TestEncodeMediumPooled).
func (c *Conduit) sendMediumPooled(pr *peer, dst int, isReq bool, handler uint8, ep, srcEP uint16, args []int32, payload []byte, flags conduit.SendFlags) error {
	qi := qidx(isReq)
	pool := pr.out[qi]
	// As in SendRef: the hot buffer for payloads copied with cached
	// stores, the round robin for the non-temporal ones (docs/am.md,
	// "Medium copies, third pass").
	hot := len(payload) < c.ntFromNow() || dst == c.rank
	var buf int
	for w := 0; ; w++ {
		var b []byte
		var ok bool
		if hot {
			buf, b, ok = pool.TryAllocHot()
		} else {
			buf, b, ok = pool.TryAlloc()
		}
		if ok {
			c.copyMedium(dst, b, payload, isReq, hot)
			break
		}
		if flags&conduit.Immediate != 0 {
			return conduit.ErrWouldBlock
		}
		c.backoff(isReq, w)
	}
	k := byte(conduit.Medium)
	if isReq {
		k |= kindReq
	}
	q := pr.ring[qi]
	size := argsEnd(len(args))
	data, ticket, ok := q.Reserve(size)
	if !ok {
		var err error
		if data, ticket, err = c.reserveWait(q, size, isReq, flags); err != nil {
			_ = pool.Free(buf)
			return err
		}
	}
	encodeFields(data, k, handler, ep, srcEP, c.rank, len(payload), buf, args)
	q.Commit(ticket)
	pr.bell.Ring()
	return nil
}

// LongView returns where a Long of n > 0 bytes to dest (an owner address)
// lands in rank dst's segment, mapped into this process: the view
// SendLong copies the payload into, or nil where the Long cannot take
// that path (dst on another host or outside the neighbourhood, no segment,
// n out of (0, MaxLongMapped], or [dest, dest+n) not inside the segment:
// the caller then sends it the general way, which words the error).
func (c *Conduit) LongView(dst int, dest uint64, n int) []byte {
	pr := &c.peers[dst]
	local := pr.seg.Local
	if !pr.mapped || pr.remote || n <= 0 || n > MaxLongMapped || dest < pr.seg.Owner {
		return nil
	}
	off := dest - pr.seg.Owner
	if off > uint64(len(local)) || uint64(n) > uint64(len(local))-off {
		return nil
	}
	return local[off : off+uint64(n)]
}

// SendLong is Send for a Long to the primordial endpoint of a mapped peer,
// with the header's fields as arguments: the payload is copied into view
// (from LongView(dst, dest, len(payload)), which the caller checked
// against the payload for overlap), then the message, which carries no
// payload, is encoded straight into the ring. len(args) <=
// conduit.MaxArgs.
func (c *Conduit) SendLong(dst int, isReq bool, handler uint8, srcEP uint16, args []int32, payload, view []byte, dest uint64, flags conduit.SendFlags) error {
	pr := &c.peers[dst]
	c.copyTo(dst, view, payload)
	k := byte(conduit.Long) | kindPlaced
	if pr.duoOK && len(args) <= duoArgs { // as in SendShort
		if isReq {
			if c.duoAsk(pr, k, handler, 0, srcEP, args, payload, dest) {
				return nil
			}
		} else if c.duoAnswer(pr, dst, k, handler, 0, srcEP, args, payload, dest) {
			return nil
		}
	}
	if isReq {
		k |= kindReq
	}
	q := pr.ring[qidx(isReq)]
	size := argsEnd(len(args))
	data, ticket, ok := q.Reserve(size)
	if !ok {
		var err error
		if data, ticket, err = c.reserveWait(q, size, isReq, flags); err != nil {
			return err
		}
	}
	encodeFields(data, k, handler, 0, srcEP, c.rank, len(payload), -1, args)
	binary.LittleEndian.PutUint64(data[offDest:], dest)
	q.Commit(ticket)
	pr.bell.Ring()
	return nil
}

// sendShortHeader is SendShort through a conduit.Header (a remote peer).
func (c *Conduit) sendShortHeader(dst int, isReq bool, handler uint8, ep, srcEP uint16, args []int32, flags conduit.SendFlags) error {
	h := conduit.Header{Cat: conduit.Short, IsReq: isReq, Handler: handler, NArgs: uint8(len(args)), EP: ep, SrcEP: srcEP}
	copy(h.Args[:], args)
	return c.SendRef(dst, &h, nil, flags)
}

// copyTo copies a Medium or Long payload that rank dst's handler reads
// next: toward another process with memcopy.Copy (from 32 KiB the lines go
// to memory, not through this core's cache, which the other core's reads
// then fetch faster: docs/am.md, "Bulk payload copies"), to this rank
// itself with copy (its own handler reads them from this cache).
func (c *Conduit) copyTo(dst int, to, from []byte) {
	if dst == c.rank {
		copy(to, from)
		return
	}
	memcopy.Copy(to, from)
}

// copyMedium is copyTo for a payload going into a pool buffer (hot: the
// buffer TryAllocHot gave, which it fills with cached stores: bulk.go's
// poolCopy).
func (c *Conduit) copyMedium(dst int, to, from []byte, isReq, hot bool) {
	if dst == c.rank {
		copy(to, from)
		return
	}
	poolCopy(to, from, isReq, hot)
}

// backoff waits for send resources: it polls (everything for a request, only
// replies for a reply), and yields the CPU more and more the longer it waits.
func (c *Conduit) backoff(isReq bool, w int) {
	if c.Poll(!isReq) > 0 {
		return
	}
	if c.cfg.Done != nil && w%64 == 63 {
		select {
		case <-c.cfg.Done:
			runtime.Goexit()
		default:
		}
	}
	switch {
	case w < 64:
		runtime.Gosched()
	case w < 1024:
		unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) // let other processes run
	default:
		time.Sleep(50 * time.Microsecond)
	}
}

// Prepare implements conduit.Conduit: the buffer is a pool buffer (or, for
// small payloads, scratch space that Commit copies into the slot).
func (c *Conduit) Prepare(dst int, isReq bool, long bool, least, most int, flags conduit.SendFlags) (conduit.Prepared, error) {
	pr := &c.peers[dst]
	qi := qidx(isReq)
	if least > poolBufSize {
		return conduit.Prepared{}, fmt.Errorf("smp: least payload %d exceeds the %d-byte buffer", least, poolBufSize)
	}
	size := min(most, poolBufSize)
	p := conduit.Prepared{Dst: dst, IsReq: isReq}
	for w := 0; ; w++ {
		idx, buf, ok := pr.out[qi].TryAlloc()
		if ok {
			p.Buf = buf[:size]
			p.Priv()[0] = uint64(idx)
			return p, nil
		}
		if flags&conduit.Immediate != 0 {
			return conduit.Prepared{}, conduit.ErrWouldBlock
		}
		c.backoff(isReq, w)
	}
}

// Commit implements conduit.Conduit.
func (c *Conduit) Commit(p *conduit.Prepared, h conduit.Header, nbytes int) error {
	pr := &c.peers[p.Dst]
	qi := qidx(h.IsReq)
	idx := int(p.Priv()[0])
	payload := p.Buf[:nbytes]
	if h.Cat == conduit.Long && pr.mapped || h.Cat == conduit.Short || pr.remote {
		// Long to a mapped peer: one copy into the segment, buffer not needed.
		err := c.Send(p.Dst, h, payload, 0)
		_ = pr.out[qi].Free(idx)
		return err
	}
	q := pr.ring[qi]
	data, ticket, ok := q.Reserve(argsEnd(int(h.NArgs)))
	if !ok {
		// Without Immediate the wait ends only with room (no error).
		data, ticket, _ = c.reserveWait(q, argsEnd(int(h.NArgs)), h.IsReq, 0)
	}
	encodeSlot(data, &h, c.rank, nbytes, idx, 0)
	q.Commit(ticket)
	pr.bell.Ring()
	return nil
}

// Poll implements conduit.Conduit.
func (c *Conduit) Poll(repliesOnly bool) int {
	if c.cfg.Remote != nil {
		return c.pollWithRemote(repliesOnly, false)
	}
	w1 := c.ringWaiting(1) || c.duoWaiting(1)
	w0 := !w1 && !repliesOnly && (c.ringWaiting(0) || c.duoWaiting(0))
	if !w1 && !w0 {
		return 0 // the empty poll of a wait loop: two loads per ring and duo peer, no call
	}
	g := gctx.ID()
	n := 0
	if w1 {
		n += c.tryDrain(1, g)
		w0 = !repliesOnly && (c.ringWaiting(0) || c.duoWaiting(0)) // requests that came meanwhile
	}
	if w0 {
		n += c.tryDrain(0, g)
	}
	if n > 0 {
		c.bell.Withdraw() // awake: producers need not ring (shm.Bell.Sleep)
	}
	return n
}

// tryDrain drains ring qi if no other goroutine consumes it (g is the
// caller's gctx.ID).
func (c *Conduit) tryDrain(qi int, g uintptr) int {
	if !c.own[qi].CompareAndSwap(0, g) {
		return 0
	}
	n := c.drain(qi, g)
	shm.StoreReleaseUintptr(&c.own[qi], 0) // unlock: orders the drain's writes before the next CAS
	return n
}

// PollWait implements conduit.Waiter: Poll for a library wait that may
// sleep. The rings are polled as by Poll; the remote transport's PollWait
// (RemoteWaiter) serves the sockets, if it has one.
func (c *Conduit) PollWait(repliesOnly bool) int {
	if c.remoteWait == nil {
		return c.Poll(repliesOnly)
	}
	return c.pollWithRemote(repliesOnly, true)
}

// pollWithRemote is Poll (PollWait if wait) when a remote transport delivers too. The handlers
// of one class (Requests, or Replies) run on one goroutine at a time,
// whichever transport brought them (the client above keeps one token per
// class): the rings are drained under that class's consumer lock, and the
// remote transport takes the same lock around each handler it runs. (Holding
// the Reply lock while running Request handlers would stall a handler whose
// Reply waits for queue space: that wait polls Replies.)
func (c *Conduit) pollWithRemote(repliesOnly, wait bool) int {
	n := 0
	if (c.ringWaiting(1) || c.duoWaiting(1)) && c.consumer[1].TryLock() {
		n += c.tryDrain(1, gctx.ID())
		c.consumer[1].Unlock()
	}
	if !repliesOnly && (c.ringWaiting(0) || c.duoWaiting(0)) && c.consumer[0].TryLock() {
		n += c.tryDrain(0, gctx.ID())
		c.consumer[0].Unlock()
	}
	if n > 0 {
		c.bell.Withdraw()
	}
	if wait {
		return n + c.remoteWait.PollWait(repliesOnly, c.deliver)
	}
	return n + c.cfg.Remote.Poll(repliesOnly, c.deliver)
}

// drain delivers up to pollBudget AMs from inbound ring qi, each decoded
// straight into the Incoming the handler dispatcher reads, and then makes
// their slots free for the senders (one store). The caller, goroutine g,
// owns own[qi].
func (c *Conduit) drain(qi int, g uintptr) int {
	q := c.inbound[qi]
	in := &c.inc[qi]
	in.G = g
	var m slotMeta
	n := 0
	if len(c.duoPeers[qi]) != 0 {
		n = c.drainDuos(qi)      // duo.go
		if n != 0 && q.Empty() { // the usual end: nothing in the ring either
			addOutside(&c.outside[qi], n)
			return n
		}
	}
	// The mailbox's message first (shm.MsgRing.ReserveMail), then the
	// ring's: mail says which one data is, for release.
	data, mail := q.PeekMail()
	outside := n
	if mail {
		outside++
	}
	for ; n < pollBudget; n++ {
		if !mail {
			var ok bool
			if data, ok = q.Peek(); !ok {
				break
			}
		}
		if err := decodeSlot(data, &in.Header, &m, c.size, MaxLongMapped); err != nil {
			c.complain("dropped a malformed AM slot: %v", err)
			mail = c.release(q, mail)
			continue
		}
		if in.IsReq != (qi == 0) {
			c.complain("dropped an AM from rank %d: a %s in the %s ring", m.Src, word(in.IsReq), word(qi == 0))
			mail = c.release(q, mail)
			continue
		}
		var pool *shm.Pool
		switch {
		case m.Inline:
			in.Payload = data[payloadOff(int(in.NArgs)) : payloadOff(int(in.NArgs))+m.NBytes]
		case in.Cat == conduit.Short:
			in.Payload = nil
		case m.Placed:
			in.Payload = c.placedPayload(in.Dest, m.NBytes)
			if in.Payload == nil {
				c.complain("dropped a Long from rank %d: placed payload [%#x, +%d) is outside this rank's segment", m.Src, in.Dest, m.NBytes)
				mail = c.release(q, mail)
				continue
			}
		default:
			pr := &c.peers[m.Src]
			pool = pr.in[qi]
			buf, err := pool.Buf(m.Buf)
			if err != nil || m.NBytes > len(buf) {
				c.complain("dropped an AM from rank %d: bad payload buffer %d (%v)", m.Src, m.Buf, err)
				mail = c.release(q, mail)
				continue
			}
			in.Payload = buf[:m.NBytes]
			// Two flag lines, fetched while the handler runs: the one the
			// Put after it writes, and the one our next pooled send to
			// this peer in the other class (the reply to a request, the
			// next request after a reply) claims first (shm.Pool's
			// PrefetchPut and PrefetchHot; docs/am.md, "Medium copies,
			// fourth pass").
			pool.PrefetchPut(m.Buf)
			pr.out[qi^1].PrefetchHot()
		}
		in.Src, in.Placed = m.Src, m.Placed
		// in.Payload is left as it is after the handler: it points into
		// the rings, the pools or the segment, which live as long as the
		// conduit, and the next message overwrites it (a store less, and
		// its write barrier check).
		c.deliver(in)
		if pool != nil {
			pool.Put(m.Buf)
		}
		mail = c.release(q, mail)
		if q.Empty() { // inlined: the usual end of a drain costs no call
			n++
			break
		}
	}
	q.Publish()
	if outside != 0 {
		addOutside(&c.outside[qi], outside)
	}
	return n
}

// release frees the message drain delivered: the mailbox's if mail, else
// the ring's; it returns false, for the next message, which comes from the
// ring.
func (c *Conduit) release(q *shm.MsgRing, mail bool) bool {
	if mail {
		q.ReleaseMail()
	} else {
		q.Release()
	}
	return false
}

// placeRemote is Remote's place function: the bytes [dest, dest+n) of this
// rank's segment, or nil. It reads the segment through ownSeg, which
// AttachSegment publishes, since transports call it from their own
// goroutines.
func (c *Conduit) placeRemote(dest uint64, n int) []byte {
	s := c.ownSeg.Load()
	if s == nil || s.Local == nil || dest < s.Owner || n < 0 {
		return nil
	}
	off := dest - s.Owner
	if off > s.Size || uint64(n) > s.Size-off {
		return nil
	}
	return s.Local[off : off+uint64(n)]
}

// placedPayload returns the view [dest, dest+n) of this rank's segment that
// a placed Long wrote, or nil if it is not inside the segment.
func (c *Conduit) placedPayload(dest uint64, n int) []byte {
	s := c.peers[c.rank].seg
	if n == 0 {
		return []byte{}
	}
	if s.Local == nil || dest < s.Owner {
		return nil
	}
	off := dest - s.Owner
	if off > s.Size || uint64(n) > s.Size-off {
		return nil
	}
	return s.Local[off : off+uint64(n)]
}

func word(isReq bool) string {
	if isReq {
		return "request"
	}
	return "reply"
}

func (c *Conduit) complain(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gexgo: rank %d: %s\n", c.rank, fmt.Sprintf(format, args...))
}

// Sleep implements conduit.Conduit.
func (c *Conduit) Sleep(timeout time.Duration) {
	if c.cfg.Remote != nil {
		c.cfg.Remote.Arm()
	}
	c.bell.Sleep(c.hasWork, timeout)
}

// AttachSegment implements conduit.Conduit.
func (c *Conduit) AttachSegment(size uint64) error {
	c.segMu.Lock()
	defer c.segMu.Unlock()
	if c.seg != nil {
		return errors.New("smp: segment already attached")
	}
	var reg *shm.Region
	var createErr error
	if size > 0 {
		reg, createErr = c.cfg.Allocator.Create("gexgo-seg-"+strconv.Itoa(c.rank), int(size))
	}
	msg := make([]byte, 1, 1+shm.DescSize+16)
	if reg != nil {
		msg[0] = 1
		d, err := reg.Desc().MarshalBinary()
		if err != nil {
			return err
		}
		msg = append(msg, d...)
		msg = binary.LittleEndian.AppendUint64(msg, uint64(addrOf(reg.Bytes())))
		msg = binary.LittleEndian.AppendUint64(msg, size)
	}
	all, err := c.b.AllGather(msg)
	if err != nil {
		return fmt.Errorf("smp: exchanging segments: %w", err)
	}
	var failed []int
	for r, m := range all {
		if len(m) == 0 || m[0] != 1 {
			failed = append(failed, r)
		}
	}
	if len(failed) == 0 {
		for r, m := range all {
			if len(m) != 1+shm.DescSize+16 {
				return fmt.Errorf("smp: rank %d sent a %d-byte segment record", r, len(m))
			}
			pr := &c.peers[r]
			pr.seg.Owner = binary.LittleEndian.Uint64(m[1+shm.DescSize:])
			pr.seg.Size = binary.LittleEndian.Uint64(m[1+shm.DescSize+8:])
			switch {
			case r == c.rank:
				pr.segReg = reg
				pr.seg.Local = reg.Bytes()[:size]
			case pr.mapped:
				var d shm.Desc
				if err := d.UnmarshalBinary(m[1 : 1+shm.DescSize]); err != nil {
					return fmt.Errorf("smp: rank %d's segment: %w", r, err)
				}
				sr, err := c.cfg.Allocator.Open(d)
				if err != nil {
					return fmt.Errorf("smp: mapping rank %d's segment: %w", r, err)
				}
				if uint64(len(sr.Bytes())) < pr.seg.Size {
					return fmt.Errorf("smp: rank %d's segment maps %d bytes, less than its size %d", r, len(sr.Bytes()), pr.seg.Size)
				}
				pr.segReg = sr
				pr.seg.Local = sr.Bytes()[:pr.seg.Size]
			}
		}
		c.seg = reg
		own := c.peers[c.rank].seg
		c.ownSeg.Store(&own)
	}
	if err := c.b.Barrier(); err != nil {
		return fmt.Errorf("smp: barrier after mapping segments: %w", err)
	}
	if createErr != nil {
		return fmt.Errorf("smp: creating a segment of %d bytes: %w", size, createErr)
	}
	if len(failed) > 0 {
		if reg != nil {
			_ = reg.Close()
		}
		return fmt.Errorf("smp: SegmentAttach failed on rank(s) %v", failed)
	}
	return nil
}

// Segment implements conduit.Conduit.
func (c *Conduit) Segment(r int) conduit.SegInfo {
	if r < 0 || r >= c.size {
		return conduit.SegInfo{}
	}
	return c.peers[r].seg
}

// RecvTraffic returns a count that grows with every AM this rank's drains
// take from its rings (the slots released, as published), their mailboxes
// and the duo lines (outside).
func (c *Conduit) RecvTraffic() uint64 {
	return c.inbound[0].Released() + c.inbound[1].Released() + c.outside[0].Load() + c.outside[1].Load()
}

// IsRemote reports whether rank p is reached through Config.Remote.
func (c *Conduit) IsRemote(p int) bool { return c.peers[p].remote }

// SentTraffic returns a count that grows with every AM this rank sends
// through shared memory (the slots reserved in the rings of every peer on
// this host; it grows with other senders' AMs to the same peers too). The
// client adds it to its progress count instead of counting each send.
func (c *Conduit) SentTraffic() uint64 {
	var n uint64
	for p := range c.peers {
		if pr := &c.peers[p]; !pr.remote && pr.ring[0] != nil {
			n += pr.ring[0].Reserved() + pr.ring[1].Reserved()
		}
	}
	return n
}

// HasRemote reports whether some ranks are reached through Config.Remote
// (on other hosts).
func (c *Conduit) HasRemote() bool {
	for p := range c.peers {
		if c.peers[p].remote {
			return true
		}
	}
	return false
}

// Done returns the channel from Config.Done (nil for process ranks, whose job
// ends by process exit).
func (c *Conduit) Done() <-chan struct{} { return c.cfg.Done }

// Barrier implements conduit.Conduit.
func (c *Conduit) Barrier() error { return c.b.Barrier() }

// Exit implements conduit.Conduit.
func (c *Conduit) Exit(code int) {
	c.markEnded(stateEnding)
	c.b.Exit(code)
}

// Abort implements conduit.Conduit.
func (c *Conduit) Abort(msg string) {
	c.markEnded(stateEnding)
	c.b.Abort(msg)
}

// OnExit implements conduit.Conduit.
func (c *Conduit) OnExit(fn func()) { c.b.OnExit(fn) }

// Close implements conduit.Conduit. Mappings are released when the process
// exits; Close releases the bootstrap connection.
func (c *Conduit) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.markEnded(stateEnded)
		c.stopWatch()
		if c.cfg.Remote != nil {
			err = c.cfg.Remote.Close()
		}
		err = errors.Join(err, c.b.Close())
	})
	return err
}
