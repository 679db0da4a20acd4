package shm

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"
)

func newTestMsgRing(t testing.TB, nslots int) (*MsgRing, []byte) {
	t.Helper()
	b := alignedBytes(MsgRingBytes(nslots))
	q, err := InitMsgRing(b, nslots)
	if err != nil {
		t.Fatalf("InitMsgRing(%d): %v", nslots, err)
	}
	return q, b
}

// fill writes a recognisable pattern of n bytes for message id.
func fillMsg(d []byte, id uint64, n int) {
	for i := 0; i < n; i++ {
		d[i] = byte(id*131 + uint64(i)*7)
	}
}

func checkMsg(t *testing.T, d []byte, id uint64, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if d[i] != byte(id*131+uint64(i)*7) {
			t.Fatalf("message %d: byte %d is %#x, want %#x", id, i, d[i], byte(id*131+uint64(i)*7))
		}
	}
}

// sendMsg reserves, writes the 4-byte length, id and pattern, and commits.
func sendMsg(q *MsgRing, id uint64, n int) bool {
	d, tk, ok := q.Reserve(12 + n)
	if !ok {
		return false
	}
	binary.LittleEndian.PutUint32(d, uint32(n))
	binary.LittleEndian.PutUint64(d[4:], id)
	fillMsg(d[12:], id, n)
	q.Commit(tk)
	return true
}

func recvMsg(t *testing.T, q *MsgRing) (id uint64, n int, ok bool) {
	t.Helper()
	d, ok := q.Peek()
	if !ok {
		return 0, 0, false
	}
	n = int(binary.LittleEndian.Uint32(d))
	id = binary.LittleEndian.Uint64(d[4:])
	if 12+n > len(d) {
		t.Fatalf("message %d of %d bytes in a %d-byte view", id, n, len(d))
	}
	checkMsg(t, d[12:], id, n)
	q.Release()
	return id, n, true
}

// TestMsgRingWrapAround sends messages of every size from 0 to several slots
// through a small ring many laps over: each arrives whole, contiguous and in
// order, messages that would wrap are preceded by a pad the consumer skips,
// and the ring is empty after each one.
func TestMsgRingWrapAround(t *testing.T) {
	q, _ := newTestMsgRing(t, 16)
	if got, want := q.MaxData(), 8*64-8; got != want {
		t.Fatalf("MaxData %d, want %d", got, want)
	}
	var id uint64
	for lap := 0; lap < 40; lap++ {
		for n := 0; 12+n <= q.MaxData(); n += 13 {
			if !sendMsg(q, id, n) {
				t.Fatalf("lap %d: Reserve(%d) failed on an empty ring", lap, 12+n)
			}
			gid, gn, ok := recvMsg(t, q)
			if !ok || gid != id || gn != n {
				t.Fatalf("lap %d: got (%d, %d, %v), want (%d, %d)", lap, gid, gn, ok, id, n)
			}
			q.Publish()
			if !q.Empty() {
				t.Fatalf("lap %d: ring not empty after the message was consumed", lap)
			}
			id++
		}
	}
}

// TestMsgRingFullAndPublish fills a ring with messages of mixed sizes: a
// Reserve that finds no room fails (without waiting), consuming alone frees
// nothing, and Publish makes the room available again.
func TestMsgRingFullAndPublish(t *testing.T) {
	q, _ := newTestMsgRing(t, 32)
	var sent, got uint64
	sizes := []int{0, 50, 100, 10, 200, 3}
	for round := 0; round < 50; round++ {
		for sendMsg(q, sent, sizes[sent%uint64(len(sizes))]) {
			sent++
		}
		if sent == got {
			t.Fatalf("round %d: ring full with nothing in it", round)
		}
		for {
			id, _, ok := recvMsg(t, q)
			if !ok {
				break
			}
			if id != got {
				t.Fatalf("got message %d, want %d", id, got)
			}
			got++
		}
		if got != sent {
			t.Fatalf("round %d: consumed %d of %d", round, got, sent)
		}
		if sendMsg(q, 1<<40, q.MaxData()-12) {
			t.Fatalf("round %d: a half-ring message fitted before Publish", round)
		}
		q.Publish()
	}
}

// TestMsgRingStaleData checks that no payload byte is ever taken for a
// commit: messages carry, at every slot boundary of their data, the exact
// tag the consumer will expect at that slot on every later lap. After they
// are consumed, the consumer must see an empty ring at each of those slots.
func TestMsgRingStaleData(t *testing.T) {
	const nslots = 16
	q, _ := newTestMsgRing(t, nslots)
	for lap := uint64(0); lap < 8; lap++ {
		d, tk, ok := q.Reserve(q.MaxData())
		if !ok {
			t.Fatal("Reserve failed on an empty ring")
		}
		forgeAndConsume(t, q, d, tk, nslots)
		if _, ok := q.Peek(); ok {
			t.Fatalf("lap %d: a forged tag in a payload was taken for a message", lap)
		}
		// Walk the consumer through the slots the payload covered, one
		// empty message each, checking nothing else appears.
		for s := uint64(0); s < nslots; s++ {
			if !sendMsg(q, s, 0) {
				t.Fatal("Reserve of a one-slot message failed")
			}
			if id, _, ok := recvMsg(t, q); !ok || id != s {
				t.Fatalf("lap %d slot %d: got %d %v", lap, s, id, ok)
			}
			q.Publish()
			if _, ok := q.Peek(); ok {
				t.Fatalf("lap %d: phantom message after slot %d", lap, s)
			}
		}
	}
}

// forgeAndConsume fills the first word of every slot after the first of the
// reserved message (data d, ticket tk) with the tag the consumer will expect
// at that slot ahead slots later, then commits, consumes and publishes it.
func forgeAndConsume(t *testing.T, q *MsgRing, d []byte, tk Ticket, ahead uint64) {
	t.Helper()
	for s := uint64(1); s < tk.k; s++ {
		binary.LittleEndian.PutUint32(d[s*MsgSlotSize-mrMsgHeader:], uint32(tk.pos+s+ahead)|mrTagBit)
		binary.LittleEndian.PutUint32(d[s*MsgSlotSize-mrMsgHeader+4:], 1)
	}
	q.Commit(tk)
	if _, ok := q.Peek(); !ok {
		t.Fatal("committed message not seen")
	}
	q.Release()
	q.Publish()
}

// TestMsgRingMPSC runs producers on several goroutines, each sending
// numbered messages of varying sizes, into one consumer that checks every
// byte and each producer's order.
func TestMsgRingMPSC(t *testing.T) {
	q, _ := newTestMsgRing(t, 64)
	const producers, per = 4, 3000
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				id := uint64(p)<<32 | uint64(i)
				for !sendMsg(q, id, (i*37+p*11)%300) {
					runtime.Gosched()
				}
			}
		}()
	}
	consumeNumbered(t, q, producers, per, func(p, i int) int { return (i*37 + p*11) % 300 })
	wg.Wait()
	if !q.Empty() {
		t.Fatal("ring not empty at the end")
	}
}

// TestMsgRingAttach checks the validation of a peer's ring and that a view
// attached later sees the owner's messages.
func TestMsgRingAttach(t *testing.T) {
	q, b := newTestMsgRing(t, 8)
	peer, err := AttachMsgRing(b)
	if err != nil {
		t.Fatal(err)
	}
	if !sendMsg(peer, 7, 30) {
		t.Fatal("Reserve through the attached view failed")
	}
	if id, n, ok := recvMsg(t, q); !ok || id != 7 || n != 30 {
		t.Fatalf("got (%d, %d, %v)", id, n, ok)
	}
	bad := []struct {
		name string
		mut  func(b []byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:100] }},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }},
		{"version", func(b []byte) []byte { b[mrOffVersion] = 9; return b }},
		{"nslots not a power of two", func(b []byte) []byte { b[mrOffNSlots] = 6; return b }},
		{"nslots past the bytes", func(b []byte) []byte { b[mrOffNSlots] = 16; return b }},
		{"misaligned", func(b []byte) []byte { return b[8:] }},
	}
	for _, c := range bad {
		cp := alignedBytes(len(b) + 64)
		copy(cp, b)
		if _, err := AttachMsgRing(c.mut(cp[:len(b)])); err == nil {
			t.Errorf("%s: AttachMsgRing accepted it", c.name)
		}
	}
	if _, err := InitMsgRing(alignedBytes(MsgRingBytes(8)), 12); err == nil {
		t.Error("InitMsgRing accepted 12 slots")
	}
	if _, err := InitMsgRing(alignedBytes(100), 8); err == nil {
		t.Error("InitMsgRing accepted too few bytes")
	}
}

// TestMsgRingCorruptCount: a peer that writes a slot count of 0 or past the
// end of the ring cannot make the consumer index outside it.
func TestMsgRingCorruptCount(t *testing.T) {
	for _, k := range []uint32{0, 5, 0xffff} {
		q, _ := newTestMsgRing(t, 8)
		for i := 0; i < 6; i++ { // move the position near the end
			sendMsg(q, uint64(i), 0)
			recvMsg(t, q)
		}
		q.Publish()
		_, tk, ok := q.Reserve(0)
		if !ok {
			t.Fatal("Reserve failed")
		}
		q.Commit(Ticket{tk.pos, uint64(k), tk.w})
		got, ok := q.Peek()
		if !ok {
			t.Fatalf("count %d: committed message not seen", k)
		}
		if len(got) != MsgSlotSize-mrMsgHeader {
			t.Fatalf("count %d: view of %d bytes, want one slot", k, len(got))
		}
		q.Release()
		q.Publish()
		if !q.Empty() {
			t.Fatalf("count %d: ring not empty", k)
		}
	}
}

// TestMsgRingNoAllocs: the whole message cycle does not allocate.
func TestMsgRingNoAllocs(t *testing.T) {
	q, _ := newTestMsgRing(t, 64)
	payload := bytes.Repeat([]byte{1}, 100)
	allocs := testing.AllocsPerRun(1000, func() {
		d, tk, ok := q.Reserve(len(payload))
		if !ok {
			t.Fatal("full")
		}
		copy(d, payload)
		q.Commit(tk)
		if _, ok := q.Peek(); !ok {
			t.Fatal("empty")
		}
		q.Release()
		q.Publish()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per message, want 0", allocs)
	}
}

// TestMsgRingStaleUnderPad: payload words forged with the tag two laps on,
// in slots that a pad covers (and does not write) on the next lap, must not
// read as messages on the lap after.
func TestMsgRingStaleUnderPad(t *testing.T) {
	const nslots = 16
	q, _ := newTestMsgRing(t, nslots)
	one := func(id uint64) {
		t.Helper()
		if !sendMsg(q, id, 0) {
			t.Fatal("Reserve of a one-slot message failed")
		}
		if got, _, ok := recvMsg(t, q); !ok || got != id {
			t.Fatalf("got %d %v, want %d", got, ok, id)
		}
		q.Publish()
		if _, ok := q.Peek(); ok {
			t.Fatalf("phantom message after message %d", id)
		}
	}
	for i := uint64(0); i < 8; i++ { // to slot 8
		one(i)
	}
	big := q.MaxData() // 8 slots: [8, 16)
	d, tk, ok := q.Reserve(big)
	if !ok || tk.pos != 8 {
		t.Fatalf("Reserve(%d): %v at %d", big, ok, tk.pos)
	}
	forgeAndConsume(t, q, d, tk, 2*nslots)
	for i := uint64(100); i < 109; i++ { // positions 16..24: slots 0..8
		one(i)
	}
	// At slot 9 an 8-slot message does not fit: a pad covers slots 9..15.
	if !sendMsg(q, 200, big-12) {
		t.Fatal("Reserve after the pad failed")
	}
	if got, _, ok := recvMsg(t, q); !ok || got != 200 {
		t.Fatalf("got %d %v after the pad", got, ok)
	}
	q.Publish()
	for i := uint64(300); i < 300+2*nslots; i++ {
		one(i)
	}
}

// TestMsgRingReserveOne: producers taking turns under a lock reserve with
// ReserveOne (no compare-and-swap on tail) through a small ring many laps
// over, messages of mixed sizes with pads at the end of the ring: every
// message arrives once, whole and in each producer's order, a full ring
// refuses without waiting, and Reserved counts the slots taken.
func TestMsgRingReserveOne(t *testing.T) {
	q, _ := newTestMsgRing(t, 32)
	const producers, per = 3, 3000
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				id := uint64(p)<<32 | uint64(i)
				n := (i*53 + p*7) % 200
				for {
					mu.Lock()
					d, tk, ok := q.ReserveOne(12 + n)
					if ok {
						binary.LittleEndian.PutUint32(d, uint32(n))
						binary.LittleEndian.PutUint64(d[4:], id)
						fillMsg(d[12:], id, n)
						q.Commit(tk)
					}
					mu.Unlock()
					if ok {
						break
					}
					runtime.Gosched()
				}
			}
		}()
	}
	consumeNumbered(t, q, producers, per, func(p, i int) int { return (i*53 + p*7) % 200 })
	wg.Wait()
	if !q.Empty() || q.Reserved() != q.Released() {
		t.Fatalf("at the end: empty %v, reserved %d, released %d", q.Empty(), q.Reserved(), q.Released())
	}
	if _, _, ok := q.ReserveOne(q.MaxData() + 1); ok {
		t.Fatal("ReserveOne took a message over MaxData")
	}
}

// consumeNumbered consumes per messages from each of producers producers,
// each message a 4-byte length n, an 8-byte id (producer<<32 | number) and n
// bytes of fillMsg's pattern: every message must come in its producer's
// order, of length size(producer, number), with every byte intact. It
// publishes the head when the ring looks empty and at the end.
func consumeNumbered(t *testing.T, q *MsgRing, producers, per int, size func(p, i int) int) {
	t.Helper()
	next := make([]int, producers)
	for got := 0; got < producers*per; {
		d, ok := q.Peek()
		if !ok {
			q.Publish()
			runtime.Gosched()
			continue
		}
		n := int(binary.LittleEndian.Uint32(d))
		id := binary.LittleEndian.Uint64(d[4:])
		p, i := int(id>>32), int(uint32(id))
		if p >= producers || i != next[p] || n != size(p, i) {
			t.Fatalf("message %#x of %d bytes out of order (next from %d: %d)", id, n, p, next[min(p, producers-1)])
		}
		checkMsg(t, d[12:], id, n)
		next[p]++
		q.Release()
		got++
	}
	q.Publish()
}
