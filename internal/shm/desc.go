package shm

import (
	"encoding/binary"
	"math"
	"strconv"
)

// Region kinds (Desc.Kind). Zero is not a valid kind.
const (
	DescMemfd uint8 = 1 // a memfd of process PID, reachable as /proc/PID/fd/FD
	DescHeap  uint8 = 2 // Go heap memory registered as ID in a Heap of this process
)

// DescSize is the length of the binary encoding of a Desc.
const DescSize = 32

// Byte offsets of the Desc encoding (little-endian). Bytes 1-3 and 12-15 are
// reserved and must be zero.
const (
	descOffKind = 0  // uint8
	descOffPID  = 4  // int32
	descOffFD   = 8  // int32
	descOffSize = 16 // uint64
	descOffID   = 24 // uint64
)

// Desc describes a region so that another process (memfd) or another
// goroutine of the same process (heap) can map it. Ranks exchange Descs through
// the bootstrap all-gather, encoded with MarshalBinary.
//
// A valid Desc has a known Kind and 0 < Size <= math.MaxInt; a memfd Desc has
// PID > 0, FD >= 0 and ID == 0; a heap Desc has PID == 0 and FD == 0.
type Desc struct {
	Kind uint8  // DescMemfd or DescHeap
	PID  int32  // memfd: owner process id
	FD   int32  // memfd: fd number in the owner
	Size uint64 // bytes
	ID   uint64 // heap: key in the Heap registry
}

func (d Desc) validate() error {
	switch d.Kind {
	case DescMemfd:
		if d.PID <= 0 {
			return formatErr("desc", "PID", strconv.Itoa(int(d.PID))+": a memfd owner must be > 0")
		}
		if d.FD < 0 {
			return formatErr("desc", "FD", strconv.Itoa(int(d.FD))+": must be >= 0")
		}
		if d.ID != 0 {
			return formatErr("desc", "ID", strconv.FormatUint(d.ID, 10)+": must be 0 for a memfd region")
		}
	case DescHeap:
		if d.PID != 0 || d.FD != 0 {
			return formatErr("desc", "PID/FD", "must be 0 for a heap region")
		}
	default:
		return formatErr("desc", "Kind", strconv.Itoa(int(d.Kind))+": not DescMemfd (1) or DescHeap (2)")
	}
	if d.Size == 0 || d.Size > math.MaxInt {
		return formatErr("desc", "Size", strconv.FormatUint(d.Size, 10)+": must be in [1, MaxInt]")
	}
	return nil
}

// AppendBinary appends the 32-byte encoding of d to b (encoding.BinaryAppender).
// It fails if d is not valid.
func (d Desc) AppendBinary(b []byte) ([]byte, error) {
	if err := d.validate(); err != nil {
		return b, err
	}
	var e [DescSize]byte
	e[descOffKind] = d.Kind
	binary.LittleEndian.PutUint32(e[descOffPID:], uint32(d.PID))
	binary.LittleEndian.PutUint32(e[descOffFD:], uint32(d.FD))
	binary.LittleEndian.PutUint64(e[descOffSize:], d.Size)
	binary.LittleEndian.PutUint64(e[descOffID:], d.ID)
	return append(b, e[:]...), nil
}

// MarshalBinary returns the fixed 32-byte encoding of d. It fails if d is not
// valid.
func (d Desc) MarshalBinary() ([]byte, error) {
	return d.AppendBinary(make([]byte, 0, DescSize))
}

// UnmarshalBinary decodes a Desc strictly: the length must be DescSize, the
// reserved bytes zero and the result valid. On error *d is unchanged.
func (d *Desc) UnmarshalBinary(b []byte) error {
	if len(b) != DescSize {
		return formatErr("desc", "length", strconv.Itoa(len(b))+" bytes, want "+strconv.Itoa(DescSize))
	}
	if b[1]|b[2]|b[3]|b[12]|b[13]|b[14]|b[15] != 0 {
		return formatErr("desc", "reserved", "bytes 1-3 and 12-15 must be zero")
	}
	v := Desc{
		Kind: b[descOffKind],
		PID:  int32(binary.LittleEndian.Uint32(b[descOffPID:])),
		FD:   int32(binary.LittleEndian.Uint32(b[descOffFD:])),
		Size: binary.LittleEndian.Uint64(b[descOffSize:]),
		ID:   binary.LittleEndian.Uint64(b[descOffID:]),
	}
	if err := v.validate(); err != nil {
		return err
	}
	*d = v
	return nil
}

// String formats d for logs: "memfd(pid=12,fd=5,size=65536)" or
// "heap(id=3,size=4096)".
func (d Desc) String() string {
	switch d.Kind {
	case DescMemfd:
		return "memfd(pid=" + strconv.Itoa(int(d.PID)) + ",fd=" + strconv.Itoa(int(d.FD)) +
			",size=" + strconv.FormatUint(d.Size, 10) + ")"
	case DescHeap:
		return "heap(id=" + strconv.FormatUint(d.ID, 10) + ",size=" + strconv.FormatUint(d.Size, 10) + ")"
	}
	return "desc(kind=" + strconv.Itoa(int(d.Kind)) + ")"
}
