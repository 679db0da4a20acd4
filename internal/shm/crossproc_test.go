package shm

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Environment of the re-executed test binary acting as a producer process.
const (
	envChild = "GEXGO_SHM_TEST_CHILD" // "ring-producer"
	envDesc  = "GEXGO_SHM_TEST_DESC"  // hex of the region's Desc
)

// Layout of the test region: ring at 0, bell, pool.
const (
	xpSlots, xpSlotSize = 256, 128
	xpBufs, xpBufSize   = 8, 1024
	xpProducers         = 4
	xpItems             = 25_000 // per producer
	xpPoolEvery         = 16     // every 16th item carries a pool buffer
)

var (
	xpBellOff = RingBytes(xpSlots, xpSlotSize)
	xpPoolOff = xpBellOff + 64
	xpSize    = xpPoolOff + PoolBytes(xpBufs, xpBufSize)
)

// fill writes the pattern of (producer, item) into b.
func fill(b []byte, p, i uint64) {
	x := p*0x9E3779B97F4A7C15 ^ i*0xBF58476D1CE4E5B9
	for k := range b {
		b[k] = byte(x >> (8 * (k % 8)))
		if k%8 == 7 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
}

func checkFill(b []byte, p, i uint64) bool {
	want := make([]byte, len(b))
	fill(want, p, i)
	return bytes.Equal(b, want)
}

// Slot data: producer uint32 @0, pool index int32 @4 (-1: none), item uint64
// @8, pattern @16..end.

// TestRingCrossProcess: the parent creates a memfd region with a ring, a bell
// and a pool; a child process (this test binary re-executed) opens it through
// /proc/<ppid>/fd/<fd> and produces from several goroutines; the parent
// consumes and checks every item and payload.
func TestRingCrossProcess(t *testing.T) {
	if os.Getenv(envChild) == "ring-producer" {
		crossProcessProducer(t)
		return
	}
	r, err := Memfd{}.Create(testName(t), xpSize)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := r.Bytes()
	q, err := InitRing(b, xpSlots, xpSlotSize)
	if err != nil {
		t.Fatal(err)
	}
	bell := BellAt(b, xpBellOff)
	pool, err := InitPool(b[xpPoolOff:], xpBufs, xpBufSize)
	if err != nil {
		t.Fatal(err)
	}
	db, err := r.Desc().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRingCrossProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envChild+"=ring-producer", envDesc+"="+hex.EncodeToString(db))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	childDone := false
	var childErr error

	next := make([]uint64, xpProducers)
	total := xpProducers * xpItems
	for got := 0; got < total; {
		d, ok := q.Peek()
		if !ok {
			if childDone { // exited and nothing left
				t.Fatalf("child exited (%v) after %d of %d items:\n%s", childErr, got, total, out.Bytes())
			}
			select {
			case childErr = <-exited:
				childDone = true // drain what it left, then fail above
			default:
				// The timeout only lets us notice a dead child.
				bell.Sleep(func() bool { return !q.Empty() }, 100*time.Millisecond)
			}
			continue
		}
		p := uint64(binary.LittleEndian.Uint32(d[0:]))
		idx := int(int32(binary.LittleEndian.Uint32(d[4:])))
		i := binary.LittleEndian.Uint64(d[8:])
		if p >= xpProducers || i != next[p] {
			t.Fatalf("item %d: producer %d item %d, want item %d", got, p, i, next[min(p, xpProducers-1)])
		}
		if !checkFill(d[16:], p, i) {
			t.Fatalf("producer %d item %d: slot payload corrupt", p, i)
		}
		if idx >= 0 {
			buf, err := pool.Buf(idx)
			if err != nil {
				t.Fatalf("producer %d item %d: %v", p, i, err)
			}
			if !checkFill(buf, p, i) {
				t.Fatalf("producer %d item %d: pool buffer %d corrupt", p, i, idx)
			}
			if err := pool.Free(idx); err != nil {
				t.Fatalf("producer %d item %d: Free(%d): %v", p, i, idx, err)
			}
		} else if i%xpPoolEvery == 0 {
			t.Fatalf("producer %d item %d: no pool buffer", p, i)
		}
		q.Release()
		next[p]++
		got++
	}
	if !childDone {
		childErr = <-exited
	}
	if childErr != nil {
		t.Fatalf("child: %v\n%s", childErr, out.Bytes())
	}
	if !q.Empty() {
		t.Fatal("extra items")
	}
	if testing.Verbose() {
		t.Logf("child output:\n%s", out.Bytes())
	}
}

func crossProcessProducer(t *testing.T) {
	db, err := hex.DecodeString(os.Getenv(envDesc))
	if err != nil {
		t.Fatal(err)
	}
	var d Desc
	if err := d.UnmarshalBinary(db); err != nil {
		t.Fatal(err)
	}
	if int(d.PID) != os.Getppid() {
		t.Fatalf("desc pid %d, parent %d", d.PID, os.Getppid())
	}
	r, err := Memfd{}.Open(d) // /proc/<ppid>/fd/<fd>
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := r.Bytes()
	q, err := AttachRing(b)
	if err != nil {
		t.Fatal(err)
	}
	bell := BellAt(b, xpBellOff)
	pool, err := AttachPool(b[xpPoolOff:])
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for p := range uint64(xpProducers) {
		wg.Go(func() {
			for i := range uint64(xpItems) {
				idx := -1
				if i%xpPoolEvery == 0 {
					for {
						var buf []byte
						var ok bool
						if idx, buf, ok = pool.TryAlloc(); ok {
							fill(buf, p, i)
							break
						}
						runtime.Gosched()
					}
				}
				for {
					s, tk, ok := q.TryReserve()
					if ok {
						binary.LittleEndian.PutUint32(s[0:], uint32(p))
						binary.LittleEndian.PutUint32(s[4:], uint32(int32(idx)))
						binary.LittleEndian.PutUint64(s[8:], i)
						fill(s[16:], p, i)
						q.Commit(tk)
						break
					}
					runtime.Gosched()
				}
				bell.Ring()
			}
		})
	}
	wg.Wait()
	fmt.Printf("child %d: produced %d items from %v\n", os.Getpid(), xpProducers*xpItems, d)
}
