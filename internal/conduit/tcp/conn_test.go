package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/auth"
	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/nettest"
)

// fakeBoot is an in-process bootstrap for transports of one test: AllGather
// meets the other ranks through a shared table.
type fakeBoot struct {
	rank, size int
	j          *fakeJob
	aborts     chan string // if set, Abort reports here instead of panicking
}

type fakeJob struct {
	mu     sync.Mutex
	cond   *sync.Cond
	round  map[int][][]byte
	counts map[int]int
	gen    []int
}

func newFakeJob(size int) *fakeJob {
	j := &fakeJob{round: map[int][][]byte{}, counts: map[int]int{}, gen: make([]int, size)}
	j.cond = sync.NewCond(&j.mu)
	return j
}

func (b *fakeBoot) Rank() int     { return b.rank }
func (b *fakeBoot) Size() int     { return b.size }
func (b *fakeBoot) JobID() string { return "testjob" }
func (b *fakeBoot) Host() string  { return fmt.Sprint("h", b.rank) }
func (b *fakeBoot) AllGather(mine []byte) ([][]byte, error) {
	j := b.j
	j.mu.Lock()
	defer j.mu.Unlock()
	g := j.gen[b.rank]
	j.gen[b.rank]++
	if j.round[g] == nil {
		j.round[g] = make([][]byte, b.size)
	}
	j.round[g][b.rank] = append([]byte(nil), mine...)
	j.counts[g]++
	j.cond.Broadcast()
	for j.counts[g] < b.size {
		j.cond.Wait()
	}
	return j.round[g], nil
}
func (b *fakeBoot) Barrier() error { _, err := b.AllGather(nil); return err }
func (b *fakeBoot) Exit(code int)  { panic(fmt.Sprint("exit ", code)) }
func (b *fakeBoot) Abort(msg string) {
	if b.aborts == nil {
		panic("abort: " + msg)
	}
	b.aborts <- msg
}
func (b *fakeBoot) OnExit(fn func()) {}
func (b *fakeBoot) Close() error     { return nil }

// TestAcceptRefusesIntruder: a client without the job secret connects to a
// rank waiting for its peers first; it is refused (and logged), and the rank
// it waits for still connects and exchanges an AM.
func TestAcceptRefusesIntruder(t *testing.T) {
	secret := bytes.Repeat([]byte{5}, 32)
	cfg := Config{Secret: secret, JobID: "testjob", Addr: "127.0.0.1", Timeout: 5 * time.Second, MaxPayload: 1 << 16}
	j := newFakeJob(2)
	t1 := New(cfg)
	t1.b, t1.rank, t1.size, t1.wake, t1.peers = &fakeBoot{rank: 1, size: 2, j: j}, 1, 2, func() {}, make([]*link, 2)
	ln, err := listen("127.0.0.1:0", false, "")
	if err != nil {
		t.Fatal(err)
	}
	t1.ln = ln
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- t1.acceptFrom([]int{0}, time.Now().Add(5*time.Second)) }()

	_, err = dialAuth(ln.Addr().String(), time.Now().Add(2*time.Second),
		&auth.Params{Secret: bytes.Repeat([]byte{6}, 32), JobID: "testjob", Rank: 0, Size: 2, Timeout: 2 * time.Second}, 1, "")
	var ae *auth.AuthError
	if !errors.As(err, &ae) {
		t.Fatalf("intruder's handshake: %v, want an authentication error", err)
	}

	t0 := New(cfg)
	t0.b, t0.rank, t0.size, t0.wake, t0.peers = &fakeBoot{rank: 0, size: 2, j: j}, 0, 2, func() {}, make([]*link, 2)
	c, err := dialAuth(ln.Addr().String(), time.Now().Add(2*time.Second), t0.auth(), 1, "")
	if err != nil {
		t.Fatalf("rank 0's handshake: %v", err)
	}
	if err := t0.add(1, c); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("acceptFrom: %v", err)
	}
	for _, tr := range []*Transport{t0, t1} {
		if err := tr.ready(); err != nil {
			t.Fatal(err)
		}
	}
	defer t0.Close()
	defer t1.Close()
	h := conduit.Header{Cat: conduit.Medium, IsReq: true, Handler: 200, NArgs: 1}
	h.Args[0] = 42
	if err := t0.Send(1, h, []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	var got []byte
	deadline := time.Now().Add(5 * time.Second)
	for got == nil && time.Now().Before(deadline) {
		t1.Poll(false, func(in *conduit.Incoming) {
			if in.Src == 0 && in.Args[0] == 42 {
				got = append([]byte(nil), in.Payload...)
			}
		})
	}
	if string(got) != "hello" {
		t.Fatalf("rank 1 got %q", got)
	}
}

// TestUnreachablePeer: a rank whose peer never answers gives up after the
// configured timeout with an error naming the peer.
func TestUnreachablePeer(t *testing.T) {
	secret := bytes.Repeat([]byte{5}, 32)
	cfg := Config{Secret: secret, JobID: "testjob", Addr: "127.0.0.1", Timeout: 300 * time.Millisecond, MaxPayload: 1 << 16}
	// Rank 1's "address" is a port nobody listens on.
	ln, err := listen("127.0.0.1:0", false, "")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	j := newFakeJob(2)
	go func() { // rank 1's side of the address exchange only
		(&fakeBoot{rank: 1, size: 2, j: j}).AllGather([]byte(dead))
	}()
	t0 := New(cfg)
	start := time.Now()
	err = t0.Start(&fakeBoot{rank: 0, size: 2, j: j}, []bool{false, true}, func() {}, nil)
	if err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("Start with an unreachable peer: %v, want an error naming rank 1", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %v, want about the 300 ms timeout", d)
	}
}

// TestConnectionReset: a connection that breaks in the middle of a frame
// ends the job (through the bootstrap's Abort) with a message naming the
// peer, instead of leaving the rank waiting for bytes that will not come.
func TestConnectionReset(t *testing.T) {
	aborts := make(chan string, 1)
	t1, b := connectedTransport(t, Config{MaxPayload: 1 << 16}, aborts)
	defer t1.Close()
	h := conduit.Header{Cat: conduit.Medium, IsReq: true, Handler: 200}
	frame := appendAM(nil, &h, make([]byte, 1000))
	b.Write(frame[:len(frame)/2]) // half a frame, then the connection breaks
	b.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		t1.Poll(false, func(*conduit.Incoming) { t.Error("a handler ran for half a frame") })
		select {
		case msg := <-aborts:
			if !strings.Contains(msg, "rank 0") {
				t.Fatalf("abort message %q does not name rank 0", msg)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("a connection broken mid-frame did not end the job")
		}
		t1.Arm()
		time.Sleep(time.Millisecond)
	}
}

// connectedTransport returns rank 1's transport of a 2-rank job, connected
// to rank 0 through a TCP pair whose other end it returns; Abort messages go
// to aborts.
func connectedTransport(t *testing.T, cfg Config, aborts chan string) (*Transport, net.Conn) {
	t.Helper()
	tr := New(cfg)
	tr.b, tr.rank, tr.size, tr.wake, tr.peers = &fakeBoot{rank: 1, size: 2, aborts: aborts}, 1, 2, func() {}, make([]*link, 2)
	a, b := nettest.TCPPair(t)
	if err := tr.add(0, a); err != nil {
		t.Fatal(err)
	}
	if err := tr.ready(); err != nil {
		t.Fatal(err)
	}
	return tr, b
}

// TestImmediateBackpressure: with FlagImmediate a send that would not fit in
// the socket's send buffer (the peer is not reading) fails with
// ErrWouldBlock instead of blocking, and succeeds again once the peer reads.
func TestImmediateBackpressure(t *testing.T) {
	a, b := nettest.TCPPair(t)
	t0 := New(Config{MaxPayload: 1 << 16})
	t0.peers = make([]*link, 2)
	if err := t0.add(1, a); err != nil {
		t.Fatal(err)
	}
	h := conduit.Header{Cat: conduit.Medium, IsReq: true, Handler: 200}
	payload := make([]byte, 1<<16)
	blocked := false
	for sent := 0; sent < 64<<20; sent += len(payload) {
		err := t0.Send(1, h, payload, conduit.Immediate)
		if errors.Is(err, conduit.ErrWouldBlock) {
			blocked = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !blocked {
		t.Fatal("64 MiB went into a socket nobody reads without backpressure")
	}
	go io.Copy(io.Discard, b) // the peer starts reading
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := t0.Send(1, h, payload, conduit.Immediate)
		if err == nil {
			break
		}
		if !errors.Is(err, conduit.ErrWouldBlock) || time.Now().After(deadline) {
			t.Fatalf("after the peer drained: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}
