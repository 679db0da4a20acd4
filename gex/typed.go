package gex

// The typed face: thin generic helpers over the spec-named calls, for
// programs that hold []float64 or []uint64 rather than []byte. Each helper
// converts its arguments (a slice view, an element index into a byte
// address, a data type code from T) and calls one spec function; none has a
// path of its own. The spec names stay: every helper says which it calls.

import (
	"reflect"
	"unsafe"
)

// Elem is the element types of the typed helpers: fixed-size numbers without
// pointers, whose bytes can travel to another process and mean the same
// there. Named types over them (type Celsius float64) are accepted too.
type Elem interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 |
		~int | ~uint | ~uintptr | ~float32 | ~float64 | ~complex64 | ~complex128
}

// sizeOf is the size of one T in bytes.
func sizeOf[T Elem]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// View returns seg's memory as a slice of T (its length the number of whole
// elements that fit). It is the same memory as seg.Bytes(): stores to it are
// what a peer's get reads and a peer's put overwrites. Segments are
// page-aligned, so every T is aligned.
func View[T Elem](seg *Segment) []T {
	if seg == nil {
		return nil
	}
	return view[T](seg.mem)
}

// PeerView returns rank's bound segment, mapped into this process, as a slice
// of T: loads and stores to it are loads and stores to the peer's memory
// (gex_EP_QueryBoundSegmentNB's local address, GASNet-EX "Core API"). Only
// self and the ranks of this rank's neighbourhood (the same host) are mapped;
// for any other rank, PeerView says so and the RMA calls (PutSlice, GetSlice)
// are the way to reach it. Ordering with the peer is the caller's business
// (a barrier, an AM, an atomic).
func PeerView[T Elem](tm *TM, rank Rank) ([]T, error) {
	if tm == nil {
		return nil, badArg("PeerView", "tm is nil")
	}
	bs, _, err := tm.QueryBoundSegmentNB(rank, 0)
	switch {
	case err != nil:
		return nil, err
	case bs.Size == 0:
		return nil, tm.c.report(badArg("PeerView", "rank %d has no bound segment (call SegmentAttach first)", rank))
	case bs.Local == nil:
		return nil, tm.c.report(badArg("PeerView", "rank %d's segment is not mapped here (it is not in this rank's neighbourhood); use PutSlice/GetSlice", rank))
	}
	return view[T](bs.Local), nil
}

// RemoteAddr returns the address, in rank's address space, of the byte at
// offset in rank's bound segment: the dest/src argument the spec's RMA, AM
// Long and atomic calls take for that location. A peer's segment generally
// lies at a different address than ours, so an address computed from this
// rank's own segment is wrong for a peer; this call is the right one. It
// reads what SegmentAttach exchanged (gex_EP_QueryBoundSegmentNB) and never
// communicates.
func (tm *TM) RemoteAddr(rank Rank, offset uintptr) (Addr, error) {
	bs, _, err := tm.QueryBoundSegmentNB(rank, FlagImmediate)
	if err != nil {
		return 0, err
	}
	if bs.Size == 0 {
		return 0, tm.c.report(badArg("RemoteAddr", "rank %d has no bound segment (call SegmentAttach first)", rank))
	}
	if uint64(offset) >= bs.Size {
		return 0, tm.c.report(badArg("RemoteAddr", "offset %d out of range [0, %d): rank %d's segment size", offset, bs.Size, rank))
	}
	return bs.Owner + Addr(offset), nil
}

// Barrier is a blocking barrier over tm: BarrierNB (gex_Coll_BarrierNB) and
// a wait for its event. Handlers keep running while it waits.
func (tm *TM) Barrier() error {
	ev, err := tm.BarrierNB(0)
	if err != nil {
		return err
	}
	return ev.Wait()
}

// elemAddr turns an element index in rank's segment into the owner address
// of that element, checking that n elements of size sz fit. It is the only
// work the typed RMA helpers add to the spec call they make.
func (tm *TM) elemAddr(op string, rank Rank, index, n, sz int, flags Flags) (Addr, error) {
	if flags&FlagPeerSegOffset != 0 {
		return 0, tm.c.report(badArg(op, "FlagPeerSegOffset is implied: index is already relative to rank %d's segment", rank))
	}
	if rank >= tm.size {
		return 0, tm.c.report(badArg(op, "rank %d out of range: team size is %d", rank, tm.size))
	}
	var owner, size uint64
	if views := tm.c.segViews.Load(); views != nil {
		v := &(*views)[tm.jobrank(rank)]
		owner, size = v.owner, v.size
	}
	if size == 0 {
		return 0, tm.c.report(badArg(op, "rank %d has no bound segment (call SegmentAttach first)", rank))
	}
	if elems := size / uint64(sz); index < 0 || uint64(index) > elems || uint64(n) > elems-uint64(index) {
		return 0, tm.c.report(badArg(op, "elements [%d, +%d) out of range: rank %d's segment holds %d elements of %d bytes", index, n, rank, elems, sz))
	}
	return Addr(owner + uint64(index)*uint64(sz)), nil
}

// PutSlice writes src into rank's segment starting at element index (the
// segment viewed as []T, as View does there): PutBlocking
// (gex_RMA_PutBlocking) at RemoteAddr(rank, index*sizeof(T)). It returns at
// remote completion.
func PutSlice[T Elem](tm *TM, rank Rank, index int, src []T, flags Flags) error {
	dest, err := tm.elemAddr("PutSlice", rank, index, len(src), sizeOf[T](), flags)
	if err != nil {
		return err
	}
	return tm.PutBlocking(rank, dest, bytesOf(src), flags)
}

// PutSliceNB is PutSlice as PutNB (gex_RMA_PutNB): the event completes at
// remote completion; lc is as for PutNB.
func PutSliceNB[T Elem](tm *TM, rank Rank, index int, src []T, lc *Event, flags Flags) (Event, error) {
	dest, err := tm.elemAddr("PutSliceNB", rank, index, len(src), sizeOf[T](), flags)
	if err != nil {
		return EventInvalid, err
	}
	return tm.PutNB(rank, dest, bytesOf(src), lc, flags)
}

// PutSliceNBI is PutSlice as PutNBI (gex_RMA_PutNBI): completion by
// Client.NBIWait(ECPut, 0) or the open access region.
func PutSliceNBI[T Elem](tm *TM, rank Rank, index int, src []T, lc *Event, flags Flags) error {
	dest, err := tm.elemAddr("PutSliceNBI", rank, index, len(src), sizeOf[T](), flags)
	if err != nil {
		return err
	}
	return tm.PutNBI(rank, dest, bytesOf(src), lc, flags)
}

// GetSlice reads len(dst) elements of rank's segment, starting at element
// index, into dst: GetBlocking (gex_RMA_GetBlocking).
func GetSlice[T Elem](tm *TM, dst []T, rank Rank, index int, flags Flags) error {
	src, err := tm.elemAddr("GetSlice", rank, index, len(dst), sizeOf[T](), flags)
	if err != nil {
		return err
	}
	return tm.GetBlocking(bytesOf(dst), rank, src, flags)
}

// GetSliceNB is GetSlice as GetNB (gex_RMA_GetNB).
func GetSliceNB[T Elem](tm *TM, dst []T, rank Rank, index int, flags Flags) (Event, error) {
	src, err := tm.elemAddr("GetSliceNB", rank, index, len(dst), sizeOf[T](), flags)
	if err != nil {
		return EventInvalid, err
	}
	return tm.GetNB(bytesOf(dst), rank, src, flags)
}

// GetSliceNBI is GetSlice as GetNBI (gex_RMA_GetNBI): completion by
// Client.NBIWait(ECGet, 0) or the open access region.
func GetSliceNBI[T Elem](tm *TM, dst []T, rank Rank, index int, flags Flags) error {
	src, err := tm.elemAddr("GetSliceNBI", rank, index, len(dst), sizeOf[T](), flags)
	if err != nil {
		return err
	}
	return tm.GetNBI(bytesOf(dst), rank, src, flags)
}

// DTOf returns the GASNet-EX data type code (gex_DT_t) of T: DTI32, DTU32,
// DTI64, DTU64, DTFLT or DTDBL by T's kind (int and uint are 64-bit here),
// and false for the element types the spec has no code for (8- and 16-bit
// integers, complex numbers), which only the user-operator reductions accept.
func DTOf[T Elem]() (DT, bool) {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Int32:
		return DTI32, true
	case reflect.Uint32:
		return DTU32, true
	case reflect.Int64:
		return DTI64, true
	case reflect.Uint64:
		return DTU64, true
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		if sizeOf[T]() == 8 {
			if reflect.TypeFor[T]().Kind() == reflect.Int {
				return DTI64, true
			}
			return DTU64, true
		}
	case reflect.Float32:
		return DTFLT, true
	case reflect.Float64:
		return DTDBL, true
	}
	return 0, false
}

// builtinDT is DTOf for the built-in reductions, as an error naming op when
// T has no code.
func builtinDT[T Elem](op string) (DT, error) {
	dt, ok := DTOf[T]()
	if !ok {
		return 0, badArg(op, "element type %v has no GASNet-EX data type (use ReduceToAllFunc/ReduceToOneFunc)", reflect.TypeFor[T]())
	}
	return dt, nil
}

// ReduceToAll reduces src element-wise with op over every member of tm and
// leaves the result in dst on every member: ReduceToAllNB
// (gex_Coll_ReduceToAllNB) with dt = DTOf[T], dt_sz = sizeof(T), dt_cnt =
// len(src), then a wait. op is a built-in operator (OPAdd, OPMult, OPMin,
// OPMax; OPAnd, OPOr, OPXor for integers). Collective: every member calls it
// with the same op and length. src and dst may be the same slice.
func ReduceToAll[T Elem](tm *TM, dst, src []T, op OP) error {
	dt, err := builtinDT[T]("ReduceToAll")
	if err != nil {
		return tm.reportTM(err)
	}
	return waitFor(tm.ReduceToAllNB(bytesOf(dst), bytesOf(src), dt, sizeOf[T](), len(src), op, nil, nil, 0))
}

// ReduceToOne is ReduceToAll with the result in dst on root only
// (gex_Coll_ReduceToOneNB); dst is not touched elsewhere and may be nil there.
func ReduceToOne[T Elem](tm *TM, root Rank, dst, src []T, op OP) error {
	dt, err := builtinDT[T]("ReduceToOne")
	if err != nil {
		return tm.reportTM(err)
	}
	return waitFor(tm.ReduceToOneNB(root, bytesOf(dst), bytesOf(src), dt, sizeOf[T](), len(src), op, nil, nil, 0))
}

// ReduceToAllFunc is ReduceToAll with a user operator over T: GEX_OP_USER_NC
// on GEX_DT_USER elements of sizeof(T) bytes, each pair combined as
// fn(earlier, later), earlier meaning from a lower rank. fn must be
// associative; it need not be commutative (the fold is in rank order with a
// fixed bracketing, so every member gets the same bits).
func ReduceToAllFunc[T Elem](tm *TM, dst, src []T, fn func(a, b T) T) error {
	if fn == nil {
		return tm.reportTM(badArg("ReduceToAllFunc", "fn is nil"))
	}
	return waitFor(tm.ReduceToAllNB(bytesOf(dst), bytesOf(src), DTUser, sizeOf[T](), len(src), OPUserNC, userFn[T], fn, 0))
}

// ReduceToOneFunc is ReduceToAllFunc with the result on root only
// (gex_Coll_ReduceToOneNB).
func ReduceToOneFunc[T Elem](tm *TM, root Rank, dst, src []T, fn func(a, b T) T) error {
	if fn == nil {
		return tm.reportTM(badArg("ReduceToOneFunc", "fn is nil"))
	}
	return waitFor(tm.ReduceToOneNB(root, bytesOf(dst), bytesOf(src), DTUser, sizeOf[T](), len(src), OPUserNC, userFn[T], fn, 0))
}

// userFn is the ReduceFn behind the *Func reductions: cdata is the user's
// func(a, b T) T, and the spec's user_op contract is arg2AndOut[i] =
// arg1[i] op arg2AndOut[i] (the engine passes the earlier operand first).
func userFn[T Elem](arg1, arg2AndOut []byte, count int, cdata any) {
	fn := cdata.(func(a, b T) T)
	a, out := view[T](arg1)[:count], view[T](arg2AndOut)[:count]
	for i := range out {
		out[i] = fn(a[i], out[i])
	}
}

// Broadcast copies root's src into dst on every member of tm (root
// included): BroadcastNB (gex_Coll_BroadcastNB) of len(dst)*sizeof(T) bytes,
// then a wait. src is read on root only and may be nil elsewhere; every
// member passes a dst of the same length.
func Broadcast[T Elem](tm *TM, root Rank, dst, src []T) error {
	return waitFor(tm.BroadcastNB(root, bytesOf(dst), bytesOf(src), len(dst)*sizeOf[T](), 0))
}

// waitFor waits for the event of a call that succeeded.
func waitFor(ev Event, err error) error {
	if err != nil {
		return err
	}
	return ev.Wait()
}

// reportTM reports err through tm's client (GEX_VERBOSE), tolerating a nil tm.
func (tm *TM) reportTM(err error) error {
	if tm == nil {
		return err
	}
	return tm.c.report(err)
}
