package ptlnet

import (
	"bytes"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// collector is a Handler that records messages.
type collector struct {
	mu   sync.Mutex
	msgs []rec
	cond *sync.Cond
}

type rec struct {
	src          Peer
	hdr, payload []byte
}

func newCollector() *collector {
	c := &collector{}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *collector) handle(src Peer, hdr, payload []byte) {
	c.mu.Lock()
	c.msgs = append(c.msgs, rec{src, bytes.Clone(hdr), bytes.Clone(payload)})
	c.cond.Broadcast()
	c.mu.Unlock()
}

func (c *collector) wait(t *testing.T, k int) []rec {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.msgs) < k {
		if time.Now().After(deadline) {
			t.Fatalf("got %d messages, want %d", len(c.msgs), k)
		}
		c.mu.Unlock()
		time.Sleep(time.Millisecond)
		c.mu.Lock()
	}
	return append([]rec(nil), c.msgs...)
}

func open(t *testing.T, pid uint32, h Handler) *Net {
	t.Helper()
	n, err := Open(Config{PID: pid, NoTCP: true}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func TestSelfAndPeerSameProcess(t *testing.T) {
	ca, cb := newCollector(), newCollector()
	a := open(t, PIDAny, ca.handle)
	b := open(t, PIDAny, cb.handle)
	if a.ID() == b.ID() {
		t.Fatalf("two Nets got the same id %v", a.ID())
	}
	sizes := []int{0, 8, 100, 239, 240, 1000, txBufSize, txBufSize + 1, 3*txBufSize + 17}
	for i, sz := range sizes {
		p := bytes.Repeat([]byte{byte(i + 1)}, sz)
		if err := a.Send(b.ID(), []byte{byte(i)}, p); err != nil {
			t.Fatal(err)
		}
		if err := a.Send(a.ID(), []byte{byte(i)}, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*collector{ca, cb} {
		got := c.wait(t, len(sizes))
		for i, m := range got {
			if m.src.ID != a.ID() || m.src.UID != a.UID() {
				t.Errorf("message %d from %+v, want %v", i, m.src, a.ID())
			}
			if len(m.hdr) != 1 || m.hdr[0] != byte(i) || len(m.payload) != sizes[i] ||
				(sizes[i] > 0 && (m.payload[0] != byte(i+1) || m.payload[sizes[i]-1] != byte(i+1))) {
				t.Errorf("message %d: hdr %v, %d bytes; want %d bytes", i, m.hdr, len(m.payload), sizes[i])
			}
		}
	}
}

func TestPIDInUse(t *testing.T) {
	a := open(t, PIDAny, func(Peer, []byte, []byte) {})
	_, err := Open(Config{PID: a.ID().PID, NoTCP: true}, func(Peer, []byte, []byte) {})
	if !errors.Is(err, ErrPIDInUse) {
		t.Fatalf("Open of a held pid: %v, want ErrPIDInUse", err)
	}
	_, err = Open(Config{PID: PIDMax(), NoTCP: true}, func(Peer, []byte, []byte) {})
	if !errors.Is(err, ErrBadPID) {
		t.Fatalf("Open of pid PIDMax() = %d: %v, want ErrBadPID", PIDMax(), err)
	}
	top, err := Open(Config{PID: PIDMax() - 1, NoTCP: true}, func(Peer, []byte, []byte) {})
	if err != nil && !errors.Is(err, ErrPIDInUse) {
		t.Fatalf("Open of pid PIDMax()-1: %v", err)
	}
	if top != nil {
		top.Close()
	}
}

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// TestSendAllocs: a small Send on an established path allocates nothing
// (shared memory, self, TCP).
func TestSendAllocs(t *testing.T) {
	for _, mode := range []string{"shm", "self", "tcp"} {
		t.Run(mode, func(t *testing.T) {
			cfg := Config{PID: PIDAny, NoTCP: mode != "tcp", ForceTCP: mode == "tcp", Secret: testSecret}
			var got atomic.Int64
			h := func(Peer, []byte, []byte) { got.Add(1) }
			a, err := Open(cfg, h)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := Open(cfg, h)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			dst := b.ID()
			if mode == "self" {
				dst = a.ID()
			}
			hdr, p := make([]byte, 64), make([]byte, 8)
			if err := a.Send(dst, hdr, p); err != nil { // establish
				t.Fatal(err)
			}
			if c := (*a.routes.Load())[dst]; mode == "tcp" {
				if _, ok := c.(*tcpConn); !ok {
					t.Fatalf("path is %T, want TCP", c)
				}
			} else if _, ok := c.(*shmConn); mode == "shm" && !ok {
				t.Fatalf("path is %T, want shared memory", c)
			}
			sent := int64(1)
			allocs := testing.AllocsPerRun(1000, func() {
				if err := a.Send(dst, hdr, p); err != nil {
					t.Fatal(err)
				}
				sent++
				// Keep the path from filling (a queued send copies).
				for got.Load() < sent-512 {
					runtime.Gosched()
				}
			})
			if allocs != 0 {
				t.Errorf("%s: %.1f allocations per 8-byte Send, want 0", mode, allocs)
			}
		})
	}
}

// TestHandlerSerializedAndPoll: Handler calls never overlap, whether they
// come from the progress goroutine or from Poll in other goroutines, and
// every message is handled exactly once.
func TestHandlerSerializedAndPoll(t *testing.T) {
	var inside, overlaps, got atomic.Int64
	b := open(t, PIDAny, func(Peer, []byte, []byte) {
		if inside.Add(1) != 1 {
			overlaps.Add(1)
		}
		got.Add(1)
		inside.Add(-1)
	})
	a := open(t, PIDAny, func(Peer, []byte, []byte) {})
	const k = 20000
	var polled atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					polled.Add(int64(b.Poll()))
				}
			}
		}()
	}
	for i := 0; i < k; i++ {
		if err := a.Send(b.ID(), nil, make([]byte, i%64)); err != nil {
			t.Fatal(err)
		}
		if err := a.Send(a.ID(), nil, nil); err != nil { // self, polled by a's goroutine
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for got.Load() < k && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if got.Load() != k || overlaps.Load() != 0 {
		t.Fatalf("handled %d of %d, %d overlapping calls", got.Load(), k, overlaps.Load())
	}
	t.Logf("%d of %d handled by Poll", polled.Load(), k)
}

// TestHandlersSendToEachOther: every message a Handler receives makes it send
// a 300 KiB message back (more than the ring and pool hold in flight), on
// both sides at once: Handler Sends queue instead of waiting, so nothing
// deadlocks and every message arrives.
func TestHandlersSendToEachOther(t *testing.T) {
	const rounds = 300
	var nets [2]*Net
	var got [2]atomic.Int64
	big := make([]byte, 300<<10)
	for i := range nets {
		nets[i] = open(t, PIDAny, func(src Peer, hdr, p []byte) {
			if got[i].Add(1) <= rounds {
				if err := nets[i].Send(src.ID, hdr, big); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := 0; i < 64; i++ {
		nets[0].Send(nets[1].ID(), []byte{0}, big)
		nets[1].Send(nets[0].ID(), []byte{1}, big)
	}
	deadline := time.Now().Add(120 * time.Second)
	for (got[0].Load() < rounds+64 || got[1].Load() < rounds+64) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got[0].Load() < rounds+64 || got[1].Load() < rounds+64 {
		t.Fatalf("got %d and %d messages, want at least %d each (stats %+v, %+v)", got[0].Load(), got[1].Load(), rounds+64, nets[0].Stats(), nets[1].Stats())
	}
}

// TestLargeMessage: a 96 MiB payload (assembled from pool chunks over shared
// memory; read straight into its own buffer over TCP) arrives intact, and the
// path works on for small messages after it.
func TestLargeMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	p := make([]byte, 96<<20)
	fillPattern(p, 1, 2, 3)
	for _, tcp := range []bool{false, true} {
		t.Run(map[bool]string{false: "shm", true: "tcp"}[tcp], func(t *testing.T) {
			cfg := Config{PID: PIDAny, NoTCP: !tcp, ForceTCP: tcp, Secret: testSecret}
			var ok, got atomic.Int64
			b, err := Open(cfg, func(_ Peer, hdr, payload []byte) {
				if bytes.Equal(payload, p[:len(payload)]) && int(hdr[0]) == len(payload)>>20 {
					ok.Add(1)
				}
				got.Add(1)
			})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			a, err := Open(cfg, func(Peer, []byte, []byte) {})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			for _, sz := range []int{96 << 20, 1 << 20, 0} {
				if err := a.Send(b.ID(), []byte{byte(sz >> 20)}, p[:sz]); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(60 * time.Second)
			for got.Load() < 3 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if got.Load() != 3 || ok.Load() != 3 {
				t.Fatalf("%d messages, %d intact, want 3", got.Load(), ok.Load())
			}
		})
	}
}

// TestSendBadArgs: Send checks its arguments before touching a path.
func TestSendBadArgs(t *testing.T) {
	t.Setenv("GEX_SECRET", "")
	t.Setenv(EnvTCPInsecure, "")
	a := open(t, PIDAny, func(Peer, []byte, []byte) {})
	for _, tc := range []struct {
		name         string
		dst          PhysID
		hdr, payload []byte
		want         error
	}{
		{"header over MaxHeader", a.ID(), make([]byte, a.MaxHeader()+1), nil, ErrTooLarge},
		{"payload over MaxPayload", a.ID(), nil, make([]byte, MaxPayload+1), ErrTooLarge},
		{"pid PIDAny", PhysID{NID: a.ID().NID, PID: PIDAny}, nil, nil, ErrUnreachable},
		{"another node without a secret", PhysID{NID: a.ID().NID + 1, PID: 1}, nil, nil, ErrUnreachable},
	} {
		if err := a.Send(tc.dst, tc.hdr, tc.payload); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := a.Send(a.ID(), make([]byte, a.MaxHeader()), nil); err != nil {
		t.Errorf("header of exactly MaxHeader: %v", err)
	}
}
