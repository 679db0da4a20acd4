package portals

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/ptlnet"
)

// The library state is process-wide because the Portals API is (Portals 4.3 §3.5: "the
// initialization state of Portals is reference counted ... within a process"); everything
// else hangs off a physical NI (one per Interface) and its four logical NIs.
var lib struct {
	mu   sync.Mutex // guards refs and the creation and removal of physical NIs
	refs atomic.Int32
	phys [MaxInterface + 1]atomic.Pointer[physNI]
}

// Init implements PtlInit (Portals 4.3 §3.5.1): it increments the library's reference count;
// the first call initializes Portals. After the final Fini, Init starts afresh (the spec
// leaves use after finalization undefined; this implementation defines it).
func Init() error {
	lib.mu.Lock()
	lib.refs.Add(1)
	lib.mu.Unlock()
	return nil
}

// Fini implements PtlFini (Portals 4.3 §3.5.2): it decrements the reference count; when it
// reaches zero every NI is finalized and every resource freed.
func Fini() {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if lib.refs.Load() <= 0 {
		return
	}
	if lib.refs.Add(-1) > 0 {
		return
	}
	for i := range lib.phys {
		if p := lib.phys[i].Load(); p != nil {
			p.mu.Lock()
			for k, ni := range p.nis {
				if ni != nil {
					ni.teardownLocked()
					p.nis[k] = nil
				}
			}
			p.mu.Unlock()
			p.close()
			lib.phys[i].Store(nil)
		}
	}
	closeJobBoot()
}

func initialized() bool { return lib.refs.Load() > 0 }

// physNI is one physical network interface of this process: the transport (a ptlnet.Net
// giving the physical ID) and up to four logical NIs on it (Portals 4.3 §2.2, §3.6).
//
// Concurrency: mu guards every field below it and all state of the logical NIs (portal
// tables, lists, unexpected headers, MDs, EQs, counters' bookkeeping). The transport's
// progress goroutine, Poll calls from waits, and API calls all take mu, so each incoming
// message is matched and applied atomically with respect to every API call, as §2.9
// requires ("each API function ... atomic with respect to ... incoming data movement").
// Counter values are atomics so CTGet reads them without mu.
type physNI struct {
	iface Interface
	net   *ptlnet.Net
	self  ptlnet.PhysID
	uid   UID

	mu      sync.Mutex
	nis     [4]*logicalNI
	niGen   [4]uint32
	closed  bool
	posted  bool          // an event or counter changed since the last wake
	waiters int           // goroutines blocked in a wait on this physical NI
	wake    chan struct{} // closed to wake them
	seq     atomic.Uint64 // wake-ups so far (while seqWatchers != 0): spinning waits look at it without the lock
	// spinning waits without a lock-free peek, which look at seq
	seqWatchers atomic.Int32
	txHdr       [hdrLen]byte // ack/reply header built by the receive path (under mu)
	rxHdr       [hdrLen]byte // a received short put header, expanded (under mu)
	ackHdr      [hdrLen]byte // header of the coalesced counting acks (under mu)
	// batching: a Batch run is in progress, so counting acks are coalesced into ctAcks,
	// which is sent before any other message and at the run's end (nic.go; under mu).
	batching bool
	ctAcks   ctAckRun
	scratch  []byte // fetch results and iovec gathers of the receive path (under mu)
	unknown  uint64 // messages for a logical NI that is not initialized

	// the live CTs and MDs, found without mu (fastpath.go)
	fastCTs fastIndex[ctObj]
	fastMDs fastIndex[mdObj]
	fastEQs fastIndex[eqObj]
}

func (p *physNI) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.net.Close()
	p.mu.Lock()
	p.wakeLocked()
	p.mu.Unlock()
}

// niIndex numbers the four logical NIs: bit 0 set for non-matching, bit 1 for physical.
func niIndex(o NIOptions) int {
	i := 0
	if o&NINoMatching != 0 {
		i |= 1
	}
	if o&NIPhysical != 0 {
		i |= 2
	}
	return i
}

// logicalNI is one of the four logical NIs of a physical NI (Portals 4.3 §2.2): its own
// portal table, objects, limits and status registers. Guarded by p.mu.
type logicalNI struct {
	p        *physNI
	idx      int
	refs     int
	opts     NIOptions
	h        NIHandle
	lim      Limits
	matching bool
	logical  bool

	pts        []ptEntry
	mds        table[mdObj]
	ents       table[entry]
	eqs        table[eqObj]
	cts        table[ctObj]
	sr         [numSR]atomic.Int64
	nUH        int
	uhFree     *uhdr
	zombies    []*entry
	early      []earlyMsg // requests that arrived before the map (logical NIs)
	earlyBytes int
	atomicTmp  []byte // iovec atomics (under p.mu)

	mapping []ProcessID
	fastMap atomic.Pointer[[]ProcessID] // mapping, for puts without mu (fastpath.go)
	rankOf  map[ptlnet.PhysID]Rank
	myRank  Rank
	// the last sender's rank (one map lookup fewer per message of a conversation);
	// valid while lastOK, cleared with a new map; under p.mu
	lastSrc  ptlnet.PhysID
	lastRank Rank
	lastOK   bool
}

// Default limits: each meets the Portals 4.3 minimum (§3.6.1: max_pt_index ≥ 249,
// max_waw_ordered_size ≥ 64, max_war_ordered_size ≥ 8) and desired values are clamped to
// [minimum, ceiling].
var (
	defaultLimits = Limits{
		MaxEntries: 1 << 16, MaxUnexpectedHeaders: 1 << 16, MaxMDs: 1 << 16, MaxCTs: 1 << 16, MaxEQs: 1 << 10,
		MaxPTIndex: 255, MaxIovecs: 1 << 10, MaxListSize: 1 << 16, MaxTriggeredOps: 1 << 16,
		MaxMsgSize: 1 << 30, MaxAtomicSize: 1 << 16, MaxFetchAtomicSize: 1 << 16,
		MaxWAWOrderedSize: 1 << 30, MaxWAROrderedSize: 1 << 30, MaxVolatileSize: 1 << 30,
		Features: TotalDataOrdering,
	}
	minLimits = Limits{
		MaxEntries: 1, MaxUnexpectedHeaders: 1, MaxMDs: 1, MaxCTs: 1, MaxEQs: 1, MaxPTIndex: 249, MaxIovecs: 1,
		MaxListSize: 1, MaxTriggeredOps: 1, MaxMsgSize: 1, MaxAtomicSize: 8, MaxFetchAtomicSize: 8,
		MaxWAWOrderedSize: 64, MaxWAROrderedSize: 8, MaxVolatileSize: 1,
	}
	ceilLimits = Limits{
		MaxEntries: 1 << 24, MaxUnexpectedHeaders: 1 << 24, MaxMDs: 1 << 24, MaxCTs: 1 << 24, MaxEQs: 1 << 16,
		MaxPTIndex: 1 << 12, MaxIovecs: 1 << 16, MaxListSize: 1 << 24, MaxTriggeredOps: 1 << 24,
		MaxMsgSize: 1 << 30, MaxAtomicSize: 1 << 16, MaxFetchAtomicSize: 1 << 16,
		MaxWAWOrderedSize: 1 << 30, MaxWAROrderedSize: 1 << 30, MaxVolatileSize: 1 << 30,
	}
)

func clampInt(want, def, lo, hi int) int {
	if want <= 0 {
		return def
	}
	return min(max(want, lo), hi)
}

func clampU(want, def, lo, hi uint64) uint64 {
	if want == 0 {
		return def
	}
	return min(max(want, lo), hi)
}

// actualLimits applies desired to the defaults (Portals 4.3 §3.6.1: desired is a hint; the
// actual limits are guaranteed). The ordered sizes are never above max_msg_size, and
// max_fetch_atomic_size never above max_atomic_size, so both readings of §3.15.6 hold.
func actualLimits(d *Limits) Limits {
	l := defaultLimits
	if d == nil {
		return l
	}
	l.MaxEntries = clampInt(d.MaxEntries, l.MaxEntries, minLimits.MaxEntries, ceilLimits.MaxEntries)
	l.MaxUnexpectedHeaders = clampInt(d.MaxUnexpectedHeaders, l.MaxUnexpectedHeaders, minLimits.MaxUnexpectedHeaders, ceilLimits.MaxUnexpectedHeaders)
	l.MaxMDs = clampInt(d.MaxMDs, l.MaxMDs, minLimits.MaxMDs, ceilLimits.MaxMDs)
	l.MaxCTs = clampInt(d.MaxCTs, l.MaxCTs, minLimits.MaxCTs, ceilLimits.MaxCTs)
	l.MaxEQs = clampInt(d.MaxEQs, l.MaxEQs, minLimits.MaxEQs, ceilLimits.MaxEQs)
	l.MaxPTIndex = clampInt(d.MaxPTIndex, l.MaxPTIndex, minLimits.MaxPTIndex, ceilLimits.MaxPTIndex)
	l.MaxIovecs = clampInt(d.MaxIovecs, l.MaxIovecs, minLimits.MaxIovecs, ceilLimits.MaxIovecs)
	l.MaxListSize = clampInt(d.MaxListSize, l.MaxListSize, minLimits.MaxListSize, ceilLimits.MaxListSize)
	l.MaxTriggeredOps = clampInt(d.MaxTriggeredOps, l.MaxTriggeredOps, minLimits.MaxTriggeredOps, ceilLimits.MaxTriggeredOps)
	l.MaxMsgSize = clampU(d.MaxMsgSize, l.MaxMsgSize, minLimits.MaxMsgSize, ceilLimits.MaxMsgSize)
	l.MaxAtomicSize = clampU(d.MaxAtomicSize, l.MaxAtomicSize, minLimits.MaxAtomicSize, ceilLimits.MaxAtomicSize)
	l.MaxFetchAtomicSize = clampU(d.MaxFetchAtomicSize, l.MaxFetchAtomicSize, minLimits.MaxFetchAtomicSize, ceilLimits.MaxFetchAtomicSize)
	l.MaxWAWOrderedSize = clampU(d.MaxWAWOrderedSize, l.MaxWAWOrderedSize, minLimits.MaxWAWOrderedSize, ceilLimits.MaxWAWOrderedSize)
	l.MaxWAROrderedSize = clampU(d.MaxWAROrderedSize, l.MaxWAROrderedSize, minLimits.MaxWAROrderedSize, ceilLimits.MaxWAROrderedSize)
	l.MaxVolatileSize = clampU(d.MaxVolatileSize, l.MaxVolatileSize, minLimits.MaxVolatileSize, ceilLimits.MaxVolatileSize)
	l.MaxFetchAtomicSize = min(l.MaxFetchAtomicSize, l.MaxAtomicSize)
	l.MaxAtomicSize = min(l.MaxAtomicSize, l.MaxMsgSize)
	l.MaxFetchAtomicSize = min(l.MaxFetchAtomicSize, l.MaxAtomicSize)
	l.MaxWAWOrderedSize = min(l.MaxWAWOrderedSize, max(l.MaxMsgSize, 64))
	l.MaxWAROrderedSize = min(l.MaxWAROrderedSize, max(l.MaxMsgSize, 8))
	return l
}

// NIInit implements PtlNIInit (Portals 4.3 §3.6.2). options must hold exactly one of
// NIMatching/NINoMatching and one of NILogical/NIPhysical. pid is the requested pid (below
// PIDMax) or PIDAny; it only matters for the first logical NI of the interface, which opens
// the physical NI. A second NIInit of the same logical NI returns the first one's handle and
// limits and counts a reference (desired and pid are then ignored).
func NIInit(iface Interface, options NIOptions, pid PID, desired *Limits) (NIHandle, Limits, error) {
	const fn = "PtlNIInit"
	if !initialized() {
		return 0, Limits{}, errf(ErrNoInit, fn, "")
	}
	if iface == IfaceDefault {
		iface = 0
	}
	if iface > MaxInterface {
		return 0, Limits{}, errf(ErrArgInvalid, fn, "iface "+strconv.Itoa(int(iface))+" is above the largest interface "+strconv.Itoa(int(MaxInterface)))
	}
	if options&^(NIMatching|NINoMatching|NILogical|NIPhysical) != 0 {
		return 0, Limits{}, errf(ErrArgInvalid, fn, "options "+options.String()+" hold unknown bits")
	}
	if (options&NIMatching != 0) == (options&NINoMatching != 0) {
		return 0, Limits{}, errf(ErrArgInvalid, fn, "options "+options.String()+" must hold exactly one of PTL_NI_MATCHING and PTL_NI_NO_MATCHING")
	}
	if (options&NILogical != 0) == (options&NIPhysical != 0) {
		return 0, Limits{}, errf(ErrArgInvalid, fn, "options "+options.String()+" must hold exactly one of PTL_NI_LOGICAL and PTL_NI_PHYSICAL")
	}
	if pid != PIDAny && pid >= PIDMax {
		return 0, Limits{}, errf(ErrArgInvalid, fn, "pid "+strconv.FormatUint(uint64(pid), 10)+" is not below PTL_PID_MAX ("+strconv.Itoa(int(PIDMax))+") nor PTL_PID_ANY")
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	p := lib.phys[iface].Load()
	if p == nil {
		p = &physNI{iface: iface, wake: make(chan struct{})}
		npid := uint32(pid)
		if pid == PIDAny {
			npid = ptlnet.PIDAny
		}
		n, err := ptlnet.Open(ptlnet.Config{PID: npid, Batch: &ptlnet.Batch{Begin: p.batchBegin, Handle: p.handleLocked, End: p.batchEnd}}, p.handle)
		if err != nil {
			if errors.Is(err, ptlnet.ErrPIDInUse) {
				return 0, Limits{}, errf(ErrPIDInUse, fn, err.Error())
			}
			if errors.Is(err, ptlnet.ErrBadPID) {
				return 0, Limits{}, errf(ErrArgInvalid, fn, err.Error())
			}
			return 0, Limits{}, errf(ErrNoSpace, fn, "opening the physical NI: "+err.Error())
		}
		p.net, p.self, p.uid = n, n.ID(), UID(n.UID())
		lib.phys[iface].Store(p)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	idx := niIndex(options)
	if ni := p.nis[idx]; ni != nil {
		ni.refs++
		return ni.h, ni.lim, nil
	}
	ni := &logicalNI{p: p, idx: idx, refs: 1, opts: options, lim: actualLimits(desired),
		matching: options&NIMatching != 0, logical: options&NILogical != 0}
	ni.pts = make([]ptEntry, ni.lim.MaxPTIndex+1)
	ni.mds.max, ni.ents.max, ni.eqs.max, ni.cts.max = ni.lim.MaxMDs, ni.lim.MaxEntries, ni.lim.MaxEQs, ni.lim.MaxCTs
	p.niGen[idx] = (p.niGen[idx] + 1) & (1<<genBits - 1)
	if p.niGen[idx] == 0 {
		p.niGen[idx] = 1
	}
	ni.h = NIHandle(mkHandle(kindNI, iface, idx, p.niGen[idx], 0))
	p.nis[idx] = ni
	return ni.h, ni.lim, nil
}

// teardownLocked frees everything of the NI: pending operations and incoming traffic for
// it are undefined afterwards (§3.6.3); here incoming traffic is dropped.
func (ni *logicalNI) teardownLocked() {
	ni.eqs.each(func(q *eqObj) { q.freed.Store(true) })
	ni.cts.each(func(c *ctObj) { c.freed.Store(true) })
	ni.mds.each(func(m *mdObj) { m.released.Store(true) })
	ni.p.posted = true
}

// Fini implements PtlNIFini (Portals 4.3 §3.6.3): it drops one reference to the logical
// NI; at zero the NI and all its objects are released.
func (h NIHandle) Fini() error {
	ni, p, err := lockNI(h, "PtlNIFini")
	if err != nil {
		return err
	}
	ni.refs--
	last := false
	if ni.refs == 0 {
		ni.teardownLocked()
		p.nis[ni.idx] = nil
		last = p.nis == [4]*logicalNI{}
	}
	p.wakeLocked()
	p.mu.Unlock()
	if last {
		lib.mu.Lock()
		if lib.phys[p.iface].Load() == p {
			p.mu.Lock()
			still := p.nis != [4]*logicalNI{}
			p.mu.Unlock()
			if !still {
				lib.phys[p.iface].Store(nil)
				p.close()
			}
		}
		lib.mu.Unlock()
	}
	return nil
}

// lockNI checks an NI handle and returns its NI with p.mu held.
func lockNI(h NIHandle, fn string) (*logicalNI, *physNI, error) {
	if !initialized() {
		return nil, nil, errf(ErrNoInit, fn, "")
	}
	hh := Handle(h)
	if !hh.valid() || hh.kind() != kindNI || hh.slot() != 0 {
		return nil, nil, errf(ErrArgInvalid, fn, "ni_handle is not an NI handle")
	}
	p := lib.phys[hh.iface()].Load()
	if p == nil {
		return nil, nil, errf(ErrArgInvalid, fn, "ni_handle names an interface that is not initialized")
	}
	p.mu.Lock()
	ni := p.nis[hh.niIndex()]
	if ni == nil || p.niGen[hh.niIndex()] != hh.gen() || p.closed {
		p.mu.Unlock()
		return nil, nil, errf(ErrArgInvalid, fn, "ni_handle names a finalized NI")
	}
	return ni, p, nil
}

// lockObj checks a handle of kind k and returns its NI with p.mu held.
func lockObj(hh Handle, k handleKind, fn, arg string) (*logicalNI, *physNI, error) {
	if !initialized() {
		return nil, nil, errf(ErrNoInit, fn, "")
	}
	if !hh.valid() || hh.kind() != k {
		return nil, nil, errf(ErrArgInvalid, fn, arg+" is not a handle of the right kind")
	}
	p := lib.phys[hh.iface()].Load()
	if p == nil {
		return nil, nil, errf(ErrArgInvalid, fn, arg+" names an interface that is not initialized")
	}
	p.mu.Lock()
	ni := p.nis[hh.niIndex()]
	if ni == nil || p.closed {
		p.mu.Unlock()
		return nil, nil, errf(ErrArgInvalid, fn, arg+" belongs to a finalized NI")
	}
	return ni, p, nil
}

// Status implements PtlNIStatus (Portals 4.3 §3.6.4): the value of one status register.
func (h NIHandle) Status(sr SRIndex) (int64, error) {
	ni, p, err := lockNI(h, "PtlNIStatus")
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	if sr >= numSR {
		return 0, errf(ErrArgInvalid, "PtlNIStatus", "status_register "+sr.String()+" is not a status register")
	}
	return ni.sr[sr].Load(), nil
}

// NIOf implements PtlNIHandle (Portals 4.3 §3.6.5): the NI an object belongs to (an NI
// handle gives itself).
func NIOf(h Handle) (NIHandle, error) {
	const fn = "PtlNIHandle"
	if !initialized() {
		return 0, errf(ErrNoInit, fn, "")
	}
	if !h.valid() {
		return 0, errf(ErrArgInvalid, fn, "handle is not valid")
	}
	if h.kind() == kindNI {
		ni, p, err := lockNI(NIHandle(h), fn)
		if err != nil {
			return 0, err
		}
		p.mu.Unlock()
		return ni.h, nil
	}
	ni, p, err := lockObj(h, h.kind(), fn, "handle")
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	if !ni.objectLive(h) {
		return 0, errf(ErrArgInvalid, fn, "handle names a freed object")
	}
	return ni.h, nil
}

func (ni *logicalNI) objectLive(h Handle) bool {
	switch h.kind() {
	case kindMD:
		return ni.mds.get(h.slot(), h.gen()) != nil
	case kindLE, kindME:
		return ni.ents.get(h.slot(), h.gen()) != nil
	case kindEQ:
		return ni.eqs.get(h.slot(), h.gen()) != nil
	case kindCT:
		return ni.cts.get(h.slot(), h.gen()) != nil
	}
	return false
}

// SetMap implements PtlSetMap (Portals 4.3 §3.6.6): it installs the rank → (nid, pid) map of
// a logically addressed NI (entry r is rank r). Later calls replace the map. If the other
// logical NI of the physical NI has no map yet it gets the same map (§3.6.6 allows it).
func (h NIHandle) SetMap(mapping []ProcessID) error {
	const fn = "PtlSetMap"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return err
	}
	defer p.mu.Unlock()
	if !ni.logical {
		return errf(ErrArgInvalid, fn, "ni_handle is a physically addressed NI")
	}
	if len(mapping) == 0 {
		return errf(ErrArgInvalid, fn, "map_size is 0")
	}
	if len(mapping) > 1<<24 {
		return errf(ErrNoSpace, fn, "map_size "+strconv.Itoa(len(mapping))+" is above 2^24")
	}
	ni.setMapLocked(mapping)
	other := p.nis[ni.idx^1]
	if other != nil && other.logical && other.mapping == nil {
		other.setMapLocked(mapping)
	}
	return nil
}

func (ni *logicalNI) setMapLocked(mapping []ProcessID) {
	ni.mapping = append([]ProcessID(nil), mapping...)
	ni.fastMap.Store(&ni.mapping)
	ni.rankOf = make(map[ptlnet.PhysID]Rank, len(mapping))
	ni.lastOK = false
	ni.myRank = RankAny
	for i := len(mapping) - 1; i >= 0; i-- {
		id := ptlnet.PhysID{NID: uint32(mapping[i].NID), PID: uint32(mapping[i].PID)}
		ni.rankOf[id] = Rank(i)
		if id == ni.p.self {
			ni.myRank = Rank(i)
		}
	}
	ni.replayEarly()
}

// GetMap implements PtlGetMap (Portals 4.3 §3.6.7): it copies min(len(mapping), map size)
// entries, leaves the rest of mapping untouched and returns the size of the whole map;
// ErrIgnored when no map is set.
func (h NIHandle) GetMap(mapping []ProcessID) (int, error) {
	const fn = "PtlGetMap"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	if !ni.logical {
		return 0, errf(ErrArgInvalid, fn, "ni_handle is a physically addressed NI")
	}
	if ni.mapping == nil {
		return 0, errf(ErrIgnored, fn, "no map is set")
	}
	copy(mapping, ni.mapping)
	return len(ni.mapping), nil
}

// ID implements PtlGetId (Portals 4.3 §3.9.2): the rank on a logical NI (RankAny if this
// process is not in the map), nid and pid on a physical NI.
func (h NIHandle) ID() (ProcessID, error) {
	const fn = "PtlGetId"
	ni, p, err := lockNI(h, fn)
	if err != nil {
		return ProcessID{}, err
	}
	defer p.mu.Unlock()
	if ni.logical {
		if ni.mapping == nil {
			return ProcessID{}, errf(ErrArgInvalid, fn, "the logical NI has no map (PtlSetMap)")
		}
		return ProcessID{Rank: ni.myRank}, nil
	}
	return Phys(NID(p.self.NID), PID(p.self.PID)), nil
}

// PhysID implements PtlGetPhysId (Portals 4.3 §3.9.3): nid and pid, on any NI.
func (h NIHandle) PhysID() (ProcessID, error) {
	_, p, err := lockNI(h, "PtlGetPhysId")
	if err != nil {
		return ProcessID{}, err
	}
	defer p.mu.Unlock()
	return Phys(NID(p.self.NID), PID(p.self.PID)), nil
}

// UID implements PtlGetUid (Portals 4.3 §3.8.1): the process's usage id, the same on every
// NI; it is the uid the transport authenticates for this process.
func (h NIHandle) UID() (UID, error) {
	_, p, err := lockNI(h, "PtlGetUid")
	if err != nil {
		return 0, err
	}
	defer p.mu.Unlock()
	return p.uid, nil
}

// resolve turns a target ProcessID into the transport address (Portals 4.3 §4.2.2 step 1).
func (ni *logicalNI) resolve(t ProcessID) (ptlnet.PhysID, bool) {
	if !ni.logical {
		return ptlnet.PhysID{NID: uint32(t.NID), PID: uint32(t.PID)}, true
	}
	if int64(t.Rank) >= int64(len(ni.mapping)) {
		return ptlnet.PhysID{}, false
	}
	m := ni.mapping[t.Rank]
	return ptlnet.PhysID{NID: uint32(m.NID), PID: uint32(m.PID)}, true
}
