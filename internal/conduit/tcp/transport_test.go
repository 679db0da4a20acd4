package tcp

import (
	"hash/crc32"
	"net"
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
	a, b := nettest.TCPPair(t)
	var trs [2]*Transport
	for r, c := range []*net.TCPConn{a, b} {
		tr := New(Config{MaxPayload: 1 << 16, MaxLong: 1 << 20})
		tr.b, tr.rank, tr.size, tr.wake, tr.peers = &fakeBoot{rank: r, size: 2}, r, 2, func() {}, make([]*link, 2)
		if err := tr.add(1-r, c); err != nil {
			t.Fatal(err)
		}
		if err := tr.ready(); err != nil {
			t.Fatal(err)
		}
		tr.SetDelivery(mk(r, tr))
		trs[r] = tr
	}
	t.Cleanup(func() { trs[0].Close(); trs[1].Close() })
	return trs
}

// TestTransportFloodBothWays: each side sends Mediums of up to 64 KiB from
// two goroutines while a third polls, and every request handler replies
// with the payload; both sockets fill, so blocked writers must poll (and
// replies sent from handlers during a blocked write must queue) or the two
// sides deadlock. Every request and reply is checked (length and CRC-32).
func TestTransportFloodBothWays(t *testing.T) {
	const perSender, senders = 600, 2
	var got, replies, bad [2]atomic.Int64
	trs := pairTransports(t, func(r int, tr *Transport) conduit.Delivery {
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
					if err := trs[r].Send(1-r, h, p, 0); err != nil {
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
	for r := range trs {
		for (got[1-r].Load() < want || replies[r].Load() < want) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	stop.Store(true)
	pollers.Wait()
	for r := range trs {
		if got[r].Load() != want || replies[r].Load() != want || bad[r].Load() != 0 {
			t.Errorf("rank %d: %d requests and %d replies arrived (want %d each), %d wrong", r, got[r].Load(), replies[r].Load(), want, bad[r].Load())
		}
	}
}
