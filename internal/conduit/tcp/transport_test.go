package tcp

import (
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/nettest"
)

// pairTransports connects two transports (ranks 0 and 1) over a loopback
// TCP connection, each delivering through the Delivery mk gives its rank.
func pairTransports(t testing.TB, mk func(rank int, tr *Transport) conduit.Delivery) [2]*Transport {
	t.Helper()
	trs := meshTransports(t, 2, mk)
	return [2]*Transport{trs[0], trs[1]}
}

// meshTransports is pairTransports for n ranks, every pair joined by its
// own loopback connection (as n ranks on n hosts).
func meshTransports(t testing.TB, n int, mk func(rank int, tr *Transport) conduit.Delivery) []*Transport {
	t.Helper()
	return meshTransportsWake(t, n, mk, nil)
}

// meshTransportsWake is meshTransports with wake(rank) as each rank's
// doorbell (nil: none).
func meshTransportsWake(t testing.TB, n int, mk func(rank int, tr *Transport) conduit.Delivery, wake func(rank int) func()) []*Transport {
	t.Helper()
	trs := make([]*Transport, n)
	for r := range trs {
		tr := New(Config{MaxPayload: 1 << 16, MaxLong: 1 << 20})
		tr.b, tr.rank, tr.size, tr.wake, tr.peers = &fakeBoot{rank: r, size: n}, r, n, func() {}, make([]*link, n)
		if wake != nil {
			tr.wake = wake(r)
		}
		trs[r] = tr
	}
	for r := range n {
		for q := r + 1; q < n; q++ {
			a, b := nettest.TCPPair(t)
			if err := trs[r].add(q, a); err != nil {
				t.Fatal(err)
			}
			if err := trs[q].add(r, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	for r, tr := range trs {
		if err := tr.ready(); err != nil {
			t.Fatal(err)
		}
		tr.SetDelivery(mk(r, tr))
	}
	t.Cleanup(func() {
		for _, tr := range trs {
			tr.Close()
		}
	})
	return trs
}

// TestTransportFloodBothWays: each rank sends Mediums of up to 64 KiB to
// every other rank from two goroutines while a third polls, and every
// request handler replies with the payload; the sockets fill, so blocked
// writers must poll (and replies sent from handlers during a blocked write
// must queue) or the ranks deadlock. Every request and reply is checked
// (length and CRC-32). Two ranks have one connection each; five have four,
// which their polls serve through the ready set (ready.go).
func TestTransportFloodBothWays(t *testing.T) {
	for _, n := range []int{2, 5} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) { transportFlood(t, n, 1200/n) })
	}
}

func transportFlood(t *testing.T, size, perSender int) {
	const senders = 2
	got, replies, bad := make([]atomic.Int64, size), make([]atomic.Int64, size), make([]atomic.Int64, size)
	trs := meshTransports(t, size, func(r int, tr *Transport) conduit.Delivery {
		return func(in *conduit.Incoming) {
			if int(in.Args[1]) != len(in.Payload) || crc32.ChecksumIEEE(in.Payload) != uint32(in.Args[0]) {
				bad[r].Add(1)
			}
			if !in.IsReq {
				replies[r].Add(1)
				return
			}
			got[r].Add(1)
			h := conduit.Header{Cat: conduit.Medium, Handler: 2, NArgs: 2, Args: in.Args}
			if err := tr.Send(in.Src, h, in.Payload, 0); err != nil {
				t.Errorf("rank %d: reply: %v", r, err)
			}
		}
	})
	if on := trs[0].rs.on(); on != (size-1 >= readySetMin) {
		t.Fatalf("%d ranks: ready set on = %v", size, on)
	}
	var stop atomic.Bool
	var wg, pollers sync.WaitGroup
	for r := range trs {
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			for !stop.Load() {
				trs[r].Poll(false, trs[r].d)
			}
		}()
		for s := 0; s < senders; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 1<<16)
				for i := range buf {
					buf[i] = byte(i*7 + r + s)
				}
				for i := 0; i < perSender; i++ {
					n := (i * 4099) % len(buf)
					if i%5 == 0 {
						n = len(buf)
					}
					p := buf[:n]
					h := conduit.Header{Cat: conduit.Medium, IsReq: true, Handler: 1, NArgs: 2}
					h.Args[0], h.Args[1] = int32(crc32.ChecksumIEEE(p)), int32(n)
					dst := (r + 1 + (i+s)%(size-1)) % size
					if err := trs[r].Send(dst, h, p, 0); err != nil {
						t.Errorf("rank %d: %v", r, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	want := int64(perSender * senders)
	deadline := time.Now().Add(60 * time.Second)
	total := func(v []atomic.Int64) (n int64) {
		for i := range v {
			n += v[i].Load()
		}
		return n
	}
	for (total(got) < want*int64(size) || total(replies) < want*int64(size)) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	pollers.Wait()
	for r := range trs {
		if replies[r].Load() != want || bad[r].Load() != 0 {
			t.Errorf("rank %d: %d replies arrived (want %d), %d AMs wrong", r, replies[r].Load(), want, bad[r].Load())
		}
	}
	if total(got) != want*int64(size) {
		t.Errorf("%d requests arrived, want %d", total(got), want*int64(size))
	}
}
