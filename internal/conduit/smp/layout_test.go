package smp

import (
	"encoding/binary"
	"testing"

	"github.com/gexgo/gexgo/internal/shm"
)

// TestRegionLayout pins the AM region layout: a magic and version word first,
// the doorbell on its own cache line, rings and pools 64-byte aligned and
// disjoint, and the whole region covering them.
func TestRegionLayout(t *testing.T) {
	if offBell%64 != 0 || offBell < 16 || offBell+shm.BellSize > offRings {
		t.Fatalf("bell at %d (size %d) must be 64-aligned, after the 16-byte header and before the rings at %d", offBell, shm.BellSize, offRings)
	}
	for _, size := range []int{1, 2, 4, 64} {
		rings, pools, total := regionBytes(size)
		rb := shm.MsgRingBytes(ringSlots)
		pb := shm.PoolBytes(poolBufs, poolBufSize)
		if rings%64 != 0 || pools%64 != 0 || rb%64 != 0 || pb%64 != 0 {
			t.Fatalf("size %d: rings %d, pools %d, ring bytes %d, pool bytes %d: not all 64-aligned", size, rings, pools, rb, pb)
		}
		if rings+2*rb > pools {
			t.Fatalf("size %d: rings [%d, %d) overlap pools at %d", size, rings, rings+2*rb, pools)
		}
		if total != pools+2*size*pb {
			t.Fatalf("size %d: total %d, want %d", size, total, pools+2*size*pb)
		}
	}
	// The largest inline payload (with 16 args) fits one ring message, and
	// a Short with 8 args fills exactly one slot.
	reg, err := shm.NewHeap().Create("ring", shm.MsgRingBytes(ringSlots))
	if err != nil {
		t.Fatal(err)
	}
	q, err := shm.InitMsgRing(reg.Bytes(), ringSlots)
	if err != nil {
		t.Fatal(err)
	}
	if payloadOff(16)+maxInline > q.MaxData() {
		t.Fatalf("inline payload of %d bytes with 16 args needs %d bytes; a ring message holds %d", maxInline, payloadOff(16)+maxInline, q.MaxData())
	}
	if shm.MsgSlots(argsEnd(8)) != 1 || shm.MsgSlots(argsEnd(9)) != 2 {
		t.Fatalf("a Short with 8 args takes %d slots, with 9 args %d; want 1 and 2", shm.MsgSlots(argsEnd(8)), shm.MsgSlots(argsEnd(9)))
	}
	for nargs := 0; nargs <= 16; nargs++ {
		// 8 bytes of ring word before the data: payloads 16-byte aligned in the slot.
		if (8+payloadOff(nargs))%16 != 0 || payloadOff(nargs) < argsEnd(nargs) {
			t.Fatalf("payload of a %d-arg message at %d", nargs, payloadOff(nargs))
		}
	}
}

// TestRegionHeader checks that a rank's region starts with the magic and
// version words and that a peer refuses a region without them.
func TestRegionHeader(t *testing.T) {
	heap := shm.NewHeap()
	c := &Conduit{b: nil, cfg: Config{Allocator: heap}, rank: 0, size: 1}
	c.topo.Nbrhd = []int{0}
	_, _, total := regionBytes(1)
	reg, err := heap.Create("t", total)
	if err != nil {
		t.Fatal(err)
	}
	c.mine = reg
	b := reg.Bytes()
	binary.LittleEndian.PutUint32(b[0:], regionMagic)
	binary.LittleEndian.PutUint32(b[4:], regionVersion)
	binary.LittleEndian.PutUint32(b[8:], 0)
	binary.LittleEndian.PutUint32(b[12:], 1)
	ringsOff, poolsOff, _ := regionBytes(1)
	rb := shm.MsgRingBytes(ringSlots)
	for i := 0; i < 2; i++ {
		if _, err := shm.InitMsgRing(b[ringsOff+i*rb:ringsOff+(i+1)*rb], ringSlots); err != nil {
			t.Fatal(err)
		}
	}
	pb := shm.PoolBytes(poolBufs, poolBufSize)
	for i := 0; i < 2; i++ {
		if _, err := shm.InitPool(b[poolsOff+i*pb:poolsOff+(i+1)*pb], poolBufs, poolBufSize); err != nil {
			t.Fatal(err)
		}
	}
	c.peers = make([]peer, 1)
	if err := c.mapPeer(0, nil, ringsOff, poolsOff, total); err != nil {
		t.Fatalf("well-formed region refused: %v", err)
	}
	for _, off := range []int{0, 4, 8, 12} {
		saved := binary.LittleEndian.Uint32(b[off:])
		binary.LittleEndian.PutUint32(b[off:], saved+1)
		if err := c.mapPeer(0, nil, ringsOff, poolsOff, total); err == nil {
			t.Errorf("region with header word at %d changed was accepted", off)
		}
		binary.LittleEndian.PutUint32(b[off:], saved)
	}
}
