package gasnet

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/gctx"
)

// The Extended API (GASNet-1 spec, "Extended API"), on gex RMA. Transfers to
// self and neighbourhood peers are copies through the mapped segment,
// complete when the call returns (NB forms return InvalidHandle); other
// nodes are reached by gex's AM protocol. Local buffers are Go slices (their
// length is NBYTES); remote addresses are owner addresses inside the target's
// segment, checked against it: an out-of-segment range, a bad node or a
// source overlapping the destination is an error, never a write elsewhere.
//
// The non-bulk and _bulk forms behave alike: every put has copied its source
// by the time it returns, which satisfies both forms' rules on reusing the
// source, and no alignment is required of either.

// Handle is gasnet_handle_t. The GASNet-EX spec makes gex_Event_t
// "interoperable with gasnet_handle_t", so it is the gex event type: a
// Handle may be synchronised with gex's Event calls and an EX event with
// these sync functions. Its zero value is InvalidHandle.
type Handle = gex.Event

// InvalidHandle is GASNET_INVALID_HANDLE: the zero Handle, "the result of
// setting all the bytes in the gasnet_handle_t datatype to zero".
var InvalidHandle = gex.EventInvalid

// The transfer calls return gex's errors as they are (each wraps the spec
// code and names the argument and the bound), so that the calls inline into
// the gex call they wrap: the layer costs nothing on the hot path. Before
// Attach they fail as for a node without a segment (GASNET_ERR_BAD_ARG);
// inside a No-Interrupt Section gex reports "holding a handler-safe lock",
// which is how a section is implemented (the spec gives code holding an HSL
// exactly the rules of a section).

// fail turns an error of a non-transfer call into this package's terms:
// before Attach it is GASNET_ERR_NOT_INIT; inside a No-Interrupt Section it
// says so.
func (j *Job) fail(op string, err error) error {
	if !j.attached.Load() {
		return newErr(op, ErrCodeNotInit, "gasnet_attach has not been called")
	}
	return j.nis.wrap(err)
}

// Put implements gasnet_put: src is in dest on node when Put returns.
func (j *Job) Put(node Node, dest Addr, src []byte) error {
	return j.tm.PutBlocking(gex.Rank(node), dest, src, 0)
}

// PutBulk implements gasnet_put_bulk.
func (j *Job) PutBulk(node Node, dest Addr, src []byte) error {
	return j.tm.PutBlocking(gex.Rank(node), dest, src, 0)
}

// Get implements gasnet_get: dst holds the len(dst) bytes at src on node
// when Get returns.
func (j *Job) Get(dst []byte, node Node, src Addr) error {
	return j.tm.GetBlocking(dst, gex.Rank(node), src, 0)
}

// GetBulk implements gasnet_get_bulk.
func (j *Job) GetBulk(dst []byte, node Node, src Addr) error {
	return j.tm.GetBlocking(dst, gex.Rank(node), src, 0)
}

// checkValSize applies "nbytes > 0 && nbytes <= SIZEOF_GASNET_REGISTER_VALUE_T".
func checkValSize(op string, nbytes int) error {
	if nbytes < 1 || nbytes > SizeofRegisterValue {
		return newErr(op, ErrCodeBadArg, fmt.Sprintf("nbytes %d out of range [1, %d] (SIZEOF_GASNET_REGISTER_VALUE_T)", nbytes, SizeofRegisterValue))
	}
	return nil
}

// PutVal implements gasnet_put_val: the low nbytes (1..8) of value, in this
// machine's byte order, are written at dest on node.
func (j *Job) PutVal(node Node, dest Addr, value RegisterValue, nbytes int) error {
	return j.tm.PutBlockingVal(gex.Rank(node), dest, value, nbytes, 0)
}

// GetVal implements gasnet_get_val: the nbytes (1..8) at src on node as an
// unsigned integer in this machine's byte order (no sign extension).
func (j *Job) GetVal(node Node, src Addr, nbytes int) (RegisterValue, error) {
	return j.tm.GetBlockingVal(gex.Rank(node), src, nbytes, 0)
}

// Memset implements gasnet_memset: as if node had run memset(dest, val,
// nbytes); the range must lie in node's segment. Neighbourhood peers are
// filled through the mapping, other nodes by a memset AM that carries no
// payload (no buffer of nbytes is allocated anywhere).
func (j *Job) Memset(node Node, dest Addr, val int, nbytes uint64) error {
	return j.tm.MemsetBlocking(gex.Rank(node), dest, byte(val), nbytes, 0)
}

// PutNB implements gasnet_put_nb: the handle completes when the bytes are in
// place; src may be reused when PutNB returns.
func (j *Job) PutNB(node Node, dest Addr, src []byte) (Handle, error) {
	return j.tm.PutNB(gex.Rank(node), dest, src, nil, 0)
}

// PutNBBulk implements gasnet_put_nb_bulk.
func (j *Job) PutNBBulk(node Node, dest Addr, src []byte) (Handle, error) {
	return j.tm.PutNB(gex.Rank(node), dest, src, nil, 0)
}

// GetNB implements gasnet_get_nb: dst is undefined until the handle is
// synchronised.
func (j *Job) GetNB(dst []byte, node Node, src Addr) (Handle, error) {
	return j.tm.GetNB(dst, gex.Rank(node), src, 0)
}

// GetNBBulk implements gasnet_get_nb_bulk.
func (j *Job) GetNBBulk(dst []byte, node Node, src Addr) (Handle, error) {
	return j.tm.GetNB(dst, gex.Rank(node), src, 0)
}

// MemsetNB implements gasnet_memset_nb (synchronised as an NB put).
func (j *Job) MemsetNB(node Node, dest Addr, val int, nbytes uint64) (Handle, error) {
	return j.tm.MemsetNB(gex.Rank(node), dest, byte(val), nbytes, 0)
}

// PutNBVal implements gasnet_put_nb_val.
func (j *Job) PutNBVal(node Node, dest Addr, value RegisterValue, nbytes int) (Handle, error) {
	return j.tm.PutNBVal(gex.Rank(node), dest, value, nbytes, 0)
}

// PutNBI implements gasnet_put_nbi (synchronised by the *Syncnbi{Puts,All}
// calls, or by the open access region).
func (j *Job) PutNBI(node Node, dest Addr, src []byte) error {
	return j.tm.PutNBI(gex.Rank(node), dest, src, nil, 0)
}

// PutNBIBulk implements gasnet_put_nbi_bulk.
func (j *Job) PutNBIBulk(node Node, dest Addr, src []byte) error {
	return j.tm.PutNBI(gex.Rank(node), dest, src, nil, 0)
}

// GetNBI implements gasnet_get_nbi (synchronised by *Syncnbi{Gets,All}).
func (j *Job) GetNBI(dst []byte, node Node, src Addr) error {
	return j.tm.GetNBI(dst, gex.Rank(node), src, 0)
}

// GetNBIBulk implements gasnet_get_nbi_bulk.
func (j *Job) GetNBIBulk(dst []byte, node Node, src Addr) error {
	return j.tm.GetNBI(dst, gex.Rank(node), src, 0)
}

// MemsetNBI implements gasnet_memset_nbi (synchronised as an NBI put).
func (j *Job) MemsetNBI(node Node, dest Addr, val int, nbytes uint64) error {
	return j.tm.MemsetNBI(gex.Rank(node), dest, byte(val), nbytes, 0)
}

// PutNBIVal implements gasnet_put_nbi_val.
func (j *Job) PutNBIVal(node Node, dest Addr, value RegisterValue, nbytes int) error {
	return j.tm.PutNBIVal(gex.Rank(node), dest, value, nbytes, 0)
}

// syncCheck refuses the sync calls where the spec does: in handlers, while
// holding an HSL, inside a No-Interrupt Section, and before Attach.
func (j *Job) syncCheck(op string) error {
	if err := j.ready(op); err != nil {
		return err
	}
	return j.nis.wrap(j.c.CheckRestricted(op))
}

// TrySyncnb implements gasnet_try_syncnb: nil (GASNET_OK) if the operation
// completed - the handle is then dead - or an error wrapping ErrNotReady.
// InvalidHandle gives nil. It polls once when the operation is not complete,
// so a loop of TrySyncnb calls makes progress.
func (j *Job) TrySyncnb(h Handle) error {
	if err := j.syncCheck("gasnet_try_syncnb"); err != nil {
		return err
	}
	err := h.Test()
	if err == gex.ErrNotReady {
		_ = j.c.Poll()
		err = h.Test()
	}
	return err
}

// WaitSyncnb implements gasnet_wait_syncnb: it returns once the operation
// completed (at once for InvalidHandle); the handle is then dead. Passing a
// handle already synchronised is an error.
func (j *Job) WaitSyncnb(h Handle) error {
	if err := j.syncCheck("gasnet_wait_syncnb"); err != nil {
		return err
	}
	return j.nis.wrap(h.Wait())
}

// TrySyncnbAll implements gasnet_try_syncnb_all: entries whose operations
// completed are overwritten with InvalidHandle; nil if all did (InvalidHandle
// entries are ignored; an empty array gives nil), ErrNotReady otherwise.
func (j *Job) TrySyncnbAll(hs []Handle) error {
	if err := j.syncCheck("gasnet_try_syncnb_all"); err != nil {
		return err
	}
	err := gex.EventTestAll(hs, 0)
	if err == gex.ErrNotReady {
		_ = j.c.Poll()
		err = gex.EventTestAll(hs, 0)
	}
	return err
}

// WaitSyncnbAll implements gasnet_wait_syncnb_all: it returns once every
// operation in hs completed; all entries are then InvalidHandle.
func (j *Job) WaitSyncnbAll(hs []Handle) error {
	if err := j.syncCheck("gasnet_wait_syncnb_all"); err != nil {
		return err
	}
	return gex.EventWaitAll(hs, 0)
}

// TrySyncnbSome implements gasnet_try_syncnb_some: completed entries become
// InvalidHandle; nil if at least one valid handle completed or there is no
// valid handle, ErrNotReady otherwise.
func (j *Job) TrySyncnbSome(hs []Handle) error {
	if err := j.syncCheck("gasnet_try_syncnb_some"); err != nil {
		return err
	}
	err := gex.EventTestSome(hs, 0)
	if err == gex.ErrNotReady {
		_ = j.c.Poll()
		err = gex.EventTestSome(hs, 0)
	}
	return err
}

// WaitSyncnbSome implements gasnet_wait_syncnb_some: it returns once at
// least one valid handle completed (at once if none is valid); completed
// entries become InvalidHandle.
func (j *Job) WaitSyncnbSome(hs []Handle) error {
	if err := j.syncCheck("gasnet_wait_syncnb_some"); err != nil {
		return err
	}
	return gex.EventWaitSome(hs, 0)
}

// Implicit-handle synchronisation. In the spec the implicit set belongs to
// the calling thread; here it is the job's (gex's NBI state is per client),
// so a sync covers every goroutine's outstanding NBI operations - a superset,
// which is always safe to wait for. It is erroneous inside an access region,
// and that is checked.

func (j *Job) syncnbi(op string, ec gex.EC, wait bool) error {
	if err := j.syncCheck(op); err != nil {
		return err
	}
	if j.regions.n.Load() != 0 && j.regions.has(gctx.ID()) {
		return newErr(op, ErrCodeBadArg, "implicit-handle synchronisation inside an access region is erroneous (end the region first)")
	}
	if wait {
		return j.c.NBIWait(ec, 0)
	}
	err := j.c.NBITest(ec, 0)
	if err == gex.ErrNotReady {
		_ = j.c.Poll()
		err = j.c.NBITest(ec, 0)
	}
	return err
}

// TrySyncnbiGets implements gasnet_try_syncnbi_gets.
func (j *Job) TrySyncnbiGets() error { return j.syncnbi("gasnet_try_syncnbi_gets", gex.ECGet, false) }

// TrySyncnbiPuts implements gasnet_try_syncnbi_puts (memset_nbi included).
func (j *Job) TrySyncnbiPuts() error { return j.syncnbi("gasnet_try_syncnbi_puts", gex.ECPut, false) }

// TrySyncnbiAll implements gasnet_try_syncnbi_all.
func (j *Job) TrySyncnbiAll() error { return j.syncnbi("gasnet_try_syncnbi_all", gex.ECAll, false) }

// WaitSyncnbiGets implements gasnet_wait_syncnbi_gets.
func (j *Job) WaitSyncnbiGets() error { return j.syncnbi("gasnet_wait_syncnbi_gets", gex.ECGet, true) }

// WaitSyncnbiPuts implements gasnet_wait_syncnbi_puts.
func (j *Job) WaitSyncnbiPuts() error { return j.syncnbi("gasnet_wait_syncnbi_puts", gex.ECPut, true) }

// WaitSyncnbiAll implements gasnet_wait_syncnbi_all.
func (j *Job) WaitSyncnbiAll() error { return j.syncnbi("gasnet_wait_syncnbi_all", gex.ECAll, true) }

// regionSet is the set of goroutines with an access region open.
type regionSet struct {
	n    atomic.Int32
	mu   sync.Mutex
	open map[uintptr]bool
}

func (s *regionSet) has(g uintptr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[g]
}

// BeginNBIAccessRegion implements gasnet_begin_nbi_accessregion: until
// EndNBIAccessRegion, the NBI operations this goroutine initiates belong to
// the region, not to the implicit set. Regions do not nest.
func (j *Job) BeginNBIAccessRegion() error {
	const op = "gasnet_begin_nbi_accessregion"
	if err := j.syncCheck(op); err != nil {
		return err
	}
	if err := j.c.NBIBeginAccessRegion(0); err != nil {
		return err
	}
	j.regions.mu.Lock()
	if j.regions.open == nil {
		j.regions.open = map[uintptr]bool{}
	}
	j.regions.open[gctx.ID()] = true
	j.regions.n.Add(1)
	j.regions.mu.Unlock()
	return nil
}

// EndNBIAccessRegion implements gasnet_end_nbi_accessregion: a handle that
// completes when every NBI operation initiated in the region has.
func (j *Job) EndNBIAccessRegion() (Handle, error) {
	h, err := j.c.NBIEndAccessRegion(0)
	if err != nil {
		return InvalidHandle, j.fail("gasnet_end_nbi_accessregion", err)
	}
	g := gctx.ID()
	j.regions.mu.Lock()
	if j.regions.open[g] {
		delete(j.regions.open, g)
		j.regions.n.Add(-1)
	}
	j.regions.mu.Unlock()
	return h, nil
}

// ValgetHandle is gasnet_valget_handle_t: the handle of GetNBVal, which only
// WaitSyncnbValget accepts (a different type from Handle, as the spec
// requires: the two "may not be intermixed").
type ValgetHandle struct {
	ev     gex.Event
	buf    *[8]byte // path (b): where the get lands
	val    RegisterValue
	nbytes int
	live   bool
}

// GetNBVal implements gasnet_get_nb_val: a non-blocking value get of nbytes
// (1..8) at src on node, synchronised only by WaitSyncnbValget. From a node
// whose segment is mapped here it completes during the call (no allocation).
func (j *Job) GetNBVal(node Node, src Addr, nbytes int) (ValgetHandle, error) {
	const op = "gasnet_get_nb_val"
	if err := checkValSize(op, nbytes); err != nil {
		return ValgetHandle{}, err
	}
	if int(node) < len(j.mapped) && j.mapped[node] {
		v, err := j.tm.GetBlockingVal(gex.Rank(node), src, nbytes, 0)
		if err != nil {
			return ValgetHandle{}, j.fail(op, err)
		}
		return ValgetHandle{val: v, nbytes: nbytes, live: true}, nil
	}
	buf := new([8]byte)
	ev, err := j.tm.GetNB(valBytes(buf, nbytes), gex.Rank(node), src, 0)
	if err != nil {
		return ValgetHandle{}, j.fail(op, err)
	}
	return ValgetHandle{ev: ev, buf: buf, nbytes: nbytes, live: true}, nil
}

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// valBytes is the part of buf that holds the low-order nbytes of a native
// integer.
func valBytes(buf *[8]byte, nbytes int) []byte {
	if littleEndian {
		return buf[:nbytes]
	}
	return buf[8-nbytes:]
}

// WaitSyncnbValget implements gasnet_wait_syncnb_valget: it waits for the
// value get and returns the value. A zero ValgetHandle (never returned by a
// successful GetNBVal) is an error; as in the spec there is no try form.
func (j *Job) WaitSyncnbValget(h ValgetHandle) (RegisterValue, error) {
	const op = "gasnet_wait_syncnb_valget"
	if !h.live {
		return 0, newErr(op, ErrCodeBadArg, "handle was not returned by a successful gasnet_get_nb_val")
	}
	if h.buf == nil {
		return h.val, nil
	}
	if err := j.syncCheck(op); err != nil {
		return 0, err
	}
	if err := h.ev.Wait(); err != nil {
		return 0, j.fail(op, err)
	}
	return binary.NativeEndian.Uint64(h.buf[:]), nil
}
