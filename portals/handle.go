package portals

// Handle is ptl_handle_any_t (Portals 4.3 §3.3): any object handle converts to it without
// loss. The layout (kind, interface, logical NI, generation, slot) is private; a handle is a
// plain value, so handles can be copied and compared like the C ones.
//
//	bits 60-63 kind (1 NI, 2 MD, 3 LE, 4 ME, 5 EQ, 6 CT)
//	bits 56-59 interface, bits 54-55 logical NI, bits 32-53 generation, bits 0-31 slot
//
// The generation changes every time a slot is reused, so a stale handle is refused with
// PTL_ARG_INVALID instead of reaching another object (Portals 4.3 Implementation Note 5).
type Handle uint64

// InvalidHandle is PTL_INVALID_HANDLE. EQNone and CTNone are the zero values of their types.
const InvalidHandle Handle = ^Handle(0)

type handleKind uint8

const (
	kindNone handleKind = iota
	kindNI
	kindMD
	kindLE
	kindME
	kindEQ
	kindCT
)

const genBits = 22

func mkHandle(k handleKind, iface Interface, ni int, gen uint32, slot uint32) Handle {
	return Handle(uint64(k)<<60 | uint64(iface)<<56 | uint64(ni)<<54 | uint64(gen&(1<<genBits-1))<<32 | uint64(slot))
}

func (h Handle) kind() handleKind { return handleKind(h >> 60) }
func (h Handle) iface() Interface { return Interface(h >> 56 & 15) }
func (h Handle) niIndex() int     { return int(h >> 54 & 3) }
func (h Handle) gen() uint32      { return uint32(h>>32) & (1<<genBits - 1) }
func (h Handle) slot() uint32     { return uint32(h) }
func (h Handle) valid() bool      { return h != InvalidHandle && h.kind() != kindNone && h.kind() <= kindCT }

// HandleIsEqual implements PtlHandleIsEqual (Portals 4.3 §3.18.1): whether two handles name
// the same object. It does not check that they are valid.
func HandleIsEqual(a, b Handle) bool { return a == b }

// NIHandle is ptl_handle_ni_t, a logical network interface.
type NIHandle Handle

// MDHandle is ptl_handle_md_t.
type MDHandle Handle

// LEHandle is ptl_handle_le_t.
type LEHandle Handle

// MEHandle is ptl_handle_me_t.
type MEHandle Handle

// EQHandle is ptl_handle_eq_t; EQNone (the zero value) is PTL_EQ_NONE.
type EQHandle Handle

// CTHandle is ptl_handle_ct_t; CTNone (the zero value) is PTL_CT_NONE.
type CTHandle Handle

const (
	EQNone EQHandle = 0 // PTL_EQ_NONE
	CTNone CTHandle = 0 // PTL_CT_NONE
)

// Handle converts to ptl_handle_any_t.
func (h NIHandle) Handle() Handle { return Handle(h) }

// Handle converts to ptl_handle_any_t.
func (h MDHandle) Handle() Handle { return Handle(h) }

// Handle converts to ptl_handle_any_t.
func (h LEHandle) Handle() Handle { return Handle(h) }

// Handle converts to ptl_handle_any_t.
func (h MEHandle) Handle() Handle { return Handle(h) }

// Handle converts to ptl_handle_any_t.
func (h EQHandle) Handle() Handle { return Handle(h) }

// Handle converts to ptl_handle_any_t.
func (h CTHandle) Handle() Handle { return Handle(h) }

// table holds the objects of one kind of a logical NI, addressed by slot and generation.
// Guarded by the physical NI's lock.
type table[T any] struct {
	slots []tslot[T]
	free  []uint32
	n     int
	max   int
}

type tslot[T any] struct {
	gen uint32
	obj *T
}

func (t *table[T]) alloc(o *T) (slot, gen uint32, ok bool) {
	if t.n >= t.max {
		return 0, 0, false
	}
	if k := len(t.free); k > 0 {
		slot = t.free[k-1]
		t.free = t.free[:k-1]
	} else {
		t.slots = append(t.slots, tslot[T]{})
		slot = uint32(len(t.slots) - 1)
	}
	s := &t.slots[slot]
	s.gen = (s.gen + 1) & (1<<genBits - 1)
	if s.gen == 0 {
		s.gen = 1
	}
	s.obj = o
	t.n++
	return slot, s.gen, true
}

func (t *table[T]) get(slot, gen uint32) *T {
	if int(slot) >= len(t.slots) {
		return nil
	}
	s := &t.slots[slot]
	if s.gen != gen || s.obj == nil {
		return nil
	}
	return s.obj
}

func (t *table[T]) release(slot uint32) {
	t.slots[slot].obj = nil
	t.free = append(t.free, slot)
	t.n--
}

func (t *table[T]) each(f func(*T)) {
	for i := range t.slots {
		if o := t.slots[i].obj; o != nil {
			f(o)
		}
	}
}
