package ptlnet

import (
	"bytes"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// resources counts what a Net could leave behind in this process.
type resources struct {
	goroutines, fds, maps int
}

func snapshot(t *testing.T) resources {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return resources{runtime.NumGoroutine(), len(fds), strings.Count(string(maps), "memfd:gexgo-ptl")}
}

// settle waits (bounded) for the goroutine count to come back to want.
func settle(t *testing.T, before resources) resources {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := snapshot(t)
		if now.goroutines <= before.goroutines && now.fds <= before.fds && now.maps <= before.maps || time.Now().After(deadline) {
			return now
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCloseLeavesNothing: after Close of two connected Nets (shared memory and
// TCP), no goroutine, descriptor, memfd mapping or socket name is left.
func TestCloseLeavesNothing(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		name := map[bool]string{false: "shm", true: "tcp"}[tcp]
		t.Run(name, func(t *testing.T) {
			before := snapshot(t)
			cfg := Config{PID: PIDAny, NoTCP: !tcp, ForceTCP: tcp, Secret: testSecret}
			ca, cb := newCollector(), newCollector()
			a, err := Open(cfg, ca.handle)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Open(cfg, cb.handle)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 100; i++ {
				p := bytes.Repeat([]byte{1}, i*5000)
				if err := a.Send(b.ID(), []byte("h"), p); err != nil {
					t.Fatal(err)
				}
				if err := b.Send(a.ID(), []byte("h"), p); err != nil {
					t.Fatal(err)
				}
			}
			ca.wait(t, 100)
			cb.wait(t, 100)
			ids := []PhysID{a.ID(), b.ID()}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); !errors.Is(err, ErrClosed) {
				t.Errorf("second Close: %v, want ErrClosed", err)
			}
			if err := a.Send(ids[1], nil, nil); !errors.Is(err, ErrClosed) {
				t.Errorf("Send after Close: %v, want ErrClosed", err)
			}
			after := settle(t, before)
			if after.goroutines > before.goroutines || after.fds > before.fds || after.maps > before.maps {
				t.Errorf("left behind: before %+v, after %+v", before, after)
			}
			for _, id := range ids {
				if c, err := net.Dial("unix", unixName(id)); err == nil {
					c.Close()
					t.Errorf("socket name of %v still held after Close", id)
				}
			}
		})
	}
}

// TestCloseWhileSending: Close while other goroutines send (to oneself and,
// through a full ring, to a peer) neither crashes nor hangs; the Sends end
// with nil or ErrClosed/ErrUnreachable.
func TestCloseWhileSending(t *testing.T) {
	for round := 0; round < 20; round++ {
		var sink atomic.Int64
		b, err := Open(Config{PID: PIDAny, NoTCP: true}, func(Peer, []byte, []byte) { // a slow receiver: the ring fills
			for i := range 300 {
				sink.Add(int64(i))
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		a, err := Open(Config{PID: PIDAny, NoTCP: true}, func(Peer, []byte, []byte) {})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 2)
		for _, dst := range []PhysID{a.ID(), b.ID()} {
			go func() {
				p := make([]byte, 100)
				for {
					if err := a.Send(dst, nil, p); err != nil {
						done <- err
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round) * 100 * time.Microsecond)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := <-done; !errors.Is(err, ErrClosed) && !errors.Is(err, ErrUnreachable) {
				t.Fatalf("Send during Close: %v", err)
			}
		}
		b.Close()
	}
}
