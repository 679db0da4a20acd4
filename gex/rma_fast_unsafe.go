package gex

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// The mapped fast path of RMA and atomics (path (a) of rma.go, the CPU
// atomics of ad.go) for the common call: primordial-shaped team (team rank
// = job rank), flags 0, a target range inside a segment mapped here, the
// caller not in restricted context. It is built from small functions the
// compiler inlines (each under its inlining budget), so that a spec-shaped
// call from user code costs one call into gex, no further call for an
// 8-byte transfer or an integer FADD, and no allocation. Whatever the fast
// path does not accept goes to the general path, which checks everything
// again and reports the error if there is one: the fast path never decides
// that a call is wrong.

// mapEntry is one job rank's segment as the fast paths see it: where it is
// mapped in this process (nil and size 0 where it is not) and the owner's
// address of its first byte. lim8 is size-7 (0 where size < 8): an
// 8-byte transfer at offset off fits iff off < lim8, one compare instead of
// mapped's two (see mapped8).
type mapEntry struct {
	base  unsafe.Pointer
	owner uint64
	size  uint64
	lim8  uint64
}

// newMapTable builds the fast paths' table from the segment views: one
// entry per job rank, returned as a pointer to the first (entry r lies r
// entries further: see mapped). The table never changes once published.
func newMapTable(views []segView) *mapEntry {
	t := make([]mapEntry, len(views))
	for r, v := range views {
		if len(v.local) > 0 {
			t[r] = mapEntry{base: unsafe.Pointer(unsafe.SliceData(v.local)), owner: v.owner, size: uint64(len(v.local))}
			if t[r].size >= 8 {
				t[r].lim8 = t[r].size - 7
			}
		}
	}
	return &t[0]
}

// fastMap is a TM's or an AD's copy of the client's table (Client.mapped),
// held in the object itself so that a fast-path call reaches the target's
// entry in two dependent loads (object, entry) instead of five (object,
// team, client, table, entry). n is the number of usable entries: 0 until
// the table is filled (at SegmentAttach for the primordial team, else by
// the first call that takes the general path after the segments are
// known), then the object's size, so that one compare rejects both an
// unfilled table and a rank out of range. n is published after p, so a
// reader that sees n > 0 sees p.
type fastMap struct {
	n atomic.Uint32
	p atomic.Pointer[mapEntry]
}

// fill publishes the client's table in f for an object of size ranks if
// the object is direct (team rank = job rank, primordial endpoints) and the
// table exists.
func (f *fastMap) fill(c *Client, direct bool, size Rank) {
	if direct && f.n.Load() == 0 {
		if t := c.mapped.Load(); t != nil {
			f.p.Store(t)
			f.n.Store(uint32(size))
		}
	}
}

// clear withdraws the table: every later call takes the general path.
func (f *fastMap) clear() { f.n.Store(0) }

// mapped returns the address in this process of the n bytes at remote
// address dest of rank's segment, or nil if the fast path does not apply:
// table not filled (not direct, no segments yet), rank not below the
// object's size, rank's segment not mapped here, or [dest, dest+n) not
// inside it. One subtraction and two compares bound the range (dest below
// the segment wraps off around and fails the first).
func (f *fastMap) mapped(rank Rank, dest Addr, n int) unsafe.Pointer {
	if uint32(rank) >= f.n.Load() {
		return nil
	}
	t := f.p.Load()
	e := (*mapEntry)(unsafe.Add(unsafe.Pointer(t), uintptr(rank)*unsafe.Sizeof(*t)))
	off := uint64(dest) - e.owner
	if off > e.size || uint64(n) > e.size-off {
		return nil
	}
	return unsafe.Add(e.base, off)
}

// entry returns the table's entry for rank, which the caller has checked
// is below f.n (map8, which tests the range itself with the entry's lim8:
// one compare and one branch).
func (f *fastMap) entry(rank Rank) *mapEntry {
	t := f.p.Load()
	return (*mapEntry)(unsafe.Add(unsafe.Pointer(t), uintptr(rank)*unsafe.Sizeof(*t)))
}

// at is the address of byte off of e's mapping.
func (e *mapEntry) at(off uint64) unsafe.Pointer { return unsafe.Add(e.base, off) }

// mappedAt is mapped for tm's table.
func (tm *TM) mappedAt(rank Rank, dest Addr, n int) unsafe.Pointer {
	return tm.fast.mapped(rank, dest, n)
}

// disjoint reports whether the n > 0 bytes at p and the slice b (len n) do
// not overlap (GASNet-EX "Extended API", NOTE 5), in one compare: with
// d = p - b, the ranges overlap iff -n < d < n, i.e. iff d+n-1 < 2n-1 in
// unsigned arithmetic. For n == 0 it reports false unless p is b's own
// address (then a copy of nothing follows, as the general path would do).
func disjoint(p unsafe.Pointer, b []byte) bool {
	n := uintptr(len(b))
	return uintptr(p)-uintptr(unsafe.Pointer(unsafe.SliceData(b)))+n-1 >= 2*n-1
}

// put8 copies the 8 bytes of src (len(src) == 8, which every caller has
// tested: the copy reads through the data pointer, so that the compiler
// adds no length check of its own where it cannot see that test, as in
// gate8's len^8|flags) to p unless they overlap (NOTE 5, left to the general
// path to report; one compare with constants) and reports whether it did:
// one load and one store.
func put8(p unsafe.Pointer, src []byte) bool {
	if uintptr(p)-uintptr(unsafe.Pointer(unsafe.SliceData(src)))+7 < 15 {
		return false
	}
	*(*[8]byte)(p) = *(*[8]byte)(unsafe.Pointer(unsafe.SliceData(src)))
	return true
}

// get8 copies the 8 bytes at p to dst (len(dst) == 8) as put8 copies.
func get8(dst []byte, p unsafe.Pointer) bool {
	if uintptr(p)-uintptr(unsafe.Pointer(unsafe.SliceData(dst)))+7 < 15 {
		return false
	}
	*(*[8]byte)(unsafe.Pointer(unsafe.SliceData(dst))) = *(*[8]byte)(p)
	return true
}

// copyTo copies src to the len(src) bytes at p unless they overlap, and
// reports whether it did (a put); copyFrom copies them to dst (a get). Two
// functions, not one with a direction, so that each inlines into
// putAny/getAny.
func copyTo(p unsafe.Pointer, src []byte) bool {
	if !disjoint(p, src) {
		return false
	}
	copyMapped(unsafe.Slice((*byte)(p), len(src)), src)
	return true
}

func copyFrom(dst []byte, p unsafe.Pointer) bool {
	if !disjoint(p, dst) {
		return false
	}
	copyMapped(dst, unsafe.Slice((*byte)(p), len(dst)))
	return true
}

// putValAt stores the low nbytes (1..8) of value at p in this machine's byte
// order (gex_RMA_Value_t semantics): the power-of-two sizes are one store.
func putValAt(p unsafe.Pointer, value uint64, nbytes int) {
	switch nbytes {
	case 8:
		binary.NativeEndian.PutUint64((*[8]byte)(p)[:], value)
	case 4:
		binary.NativeEndian.PutUint32((*[4]byte)(p)[:], uint32(value))
	default:
		var buf [8]byte
		copy(unsafe.Slice((*byte)(p), nbytes), valBytes(&buf, value, nbytes))
	}
}

// getValAt reads the nbytes (1..8) at p as an unsigned integer in this
// machine's byte order.
func getValAt(p unsafe.Pointer, nbytes int) uint64 {
	switch nbytes {
	case 8:
		return binary.NativeEndian.Uint64((*[8]byte)(p)[:])
	case 4:
		return uint64(binary.NativeEndian.Uint32((*[4]byte)(p)[:]))
	}
	var buf [8]byte
	copy(valBytes(&buf, 0, nbytes), unsafe.Slice((*byte)(p), nbytes))
	return binary.NativeEndian.Uint64(buf[:])
}

// faddAt adds d to the integer T at p and returns the previous value. A
// method, not a generic function, so that inlined into OpNB/OpNBI it needs
// no dictionary of its own.
func (ad *AD[T]) faddAt(p unsafe.Pointer, d T) T {
	if unsafe.Sizeof(d) == 8 {
		w := *(*uint64)(unsafe.Pointer(&d))
		old := (*atomic.Uint64)(p).Add(w) - w
		return *(*T)(unsafe.Pointer(&old))
	}
	w := *(*uint32)(unsafe.Pointer(&d))
	old := (*atomic.Uint32)(p).Add(w) - w
	return *(*T)(unsafe.Pointer(&old))
}

// addOp reports whether a call is an integer FADD (result non-nil) or ADD
// of the domain's set with flags 0 at an address aligned for T.
func (ad *AD[T]) addOp(result *T, addr Addr, op OP, flags Flags) bool {
	return (op == OPFAdd && result != nil || op == OPAdd) && flags|Flags(uintptr(addr)%unsafe.Sizeof(*result)) == 0 && op&ad.ops != 0 && ad.integer
}

// otherOp reports whether a call that addOp refused is still one for the
// mapped fast path: flags 0, a single opcode of the domain's set, result
// non-nil if op fetches, an address aligned for T.
func (ad *AD[T]) otherOp(result *T, addr Addr, op OP, flags Flags) bool {
	return flags|Flags(uintptr(addr)%unsafe.Sizeof(*result)) == 0 && op&ad.ops != 0 && op&(op-1) == 0 && (result != nil || op&opResult == 0)
}

// The 8-byte PutBlocking, PutNBI (lc_opt nil), GetBlocking and GetNBI
// inline into the caller whole (docs/rma.md, "Fourth pass"). The checks of the fast path cost about 150 in the
// compiler's inlining measure against a budget of 80, and any call that is
// not inlined costs 57 more, so that no single function can hold them and
// still fall back to the general path. A call through a function-typed
// parameter costs only 17 (inlineParamCallCost: "inlining might expose a
// constant function"), and once the caller has inlined the function that
// makes it, the parameter is a known function that is inlined in turn,
// with its own budget. The fast path is therefore a chain of functions
// that each fit the budget, each calling the next through a parameter:
//
//	GetBlocking -> blocking8 -> gate8 -> map8 -> get8Fin, else getBlockingSlow -> getAny
//
// blocking8 tries gate8 (the table, the length, flags and half the
// restricted-context check) and otherwise calls the general path (getAny,
// which checks everything again and copies any length); map8 finds the
// mapped address and hands it to fin (the rest of the restricted-context
// check, the overlap check and the copy). In a caller that calls GetBlocking directly
// all of it is inlined and the general path is one direct call; through a
// method value or an interface the same code runs as calls through function
// values. TestFastPathInlining checks both the budgets and that a program's
// loop inlines map8 and the fin functions.

// fin8 finishes an 8-byte put or get at the mapped address p: it reports
// false, having done nothing, where the general path must decide.
type fin8 func(c *Client, buf []byte, p unsafe.Pointer) bool

// slow8 is the general path of the error-only forms, in blocking8's
// argument order (buf, rank, addr, lc, flags; lc nil for the gets).
type slow8 func(tm *TM, buf []byte, rank Rank, addr Addr, lc *Event, flags Flags) error

// at8 finds the mapped address of an 8-byte transfer and calls fin there.
type at8 func(tm *TM, buf []byte, rank Rank, addr Addr, fin fin8) bool

// blocking8 is the body of PutBlocking, PutNBI, GetBlocking and GetNBI:
// for lc nil, gate (gate8, then at and fin), else slow (which also takes
// every lc_opt other than nil: fastLC is putAny's).
func (tm *TM) blocking8(buf []byte, rank Rank, addr Addr, lc *Event, flags Flags,
	gate func(tm *TM, buf []byte, rank Rank, addr Addr, flags Flags, at at8, fin fin8) bool, at at8, fin fin8, slow slow8) error {
	if lc == nil {
		if gate(tm, buf, rank, addr, flags, at, fin) {
			return nil
		}
	}
	return slow(tm, buf, rank, addr, lc, flags)
}

// gate8 tests the shape of the call (the table filled and rank below the
// object's size, an 8-byte buf, flags 0: one compare each) and the first
// half of the restricted-context check (restrictedA, the handler words),
// then calls at.
func (tm *TM) gate8(buf []byte, rank Rank, addr Addr, flags Flags, at at8, fin fin8) bool {
	if uint32(rank) < tm.fast.n.Load() && len(buf)^8|int(flags) == 0 {
		// An if of its own: in the && chain the compiler builds a bool
		// first.
		if tm.c.restrictedA() == 0 {
			return at(tm, buf, rank, addr, fin)
		}
	}
	return false
}

// map8 is mapped for 8 bytes, the bound in one compare (off < lim8, where
// addr below the segment wraps off around), then fin at the address.
func (tm *TM) map8(buf []byte, rank Rank, addr Addr, fin fin8) bool {
	e := tm.fast.entry(rank)
	if off := uint64(addr) - e.owner; off < e.lim8 {
		return fin(tm.c, buf, e.at(off))
	}
	return false
}

// get8Fin and put8Fin: the rest of the restricted-context check
// (restrictedB: the held-AM handler word, the Prepare and HSL counts), and
// the 8 bytes do not overlap buf (NOTE 5), then the copy.
func get8Fin(c *Client, dst []byte, p unsafe.Pointer) bool {
	return c.restrictedB() == 0 && get8(dst, p)
}

func put8Fin(c *Client, src []byte, p unsafe.Pointer) bool {
	return c.restrictedB() == 0 && put8(p, src)
}
