package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/conduit"
)

// pair runs the handshake over a real loopback TCP connection: the dialer
// with (secretD, jobD, rankD), the acceptor with (secretA, jobA, rankA).
func pair(t *testing.T, secretD, secretA []byte, jobD, jobA string, rankD, rankA, size int) (peerOfD, peerOfA int, errD, errA error) {
	t.Helper()
	ln, err := listen("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		peer int
		err  error
	}
	done := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- res{-1, err}
			return
		}
		defer c.Close()
		p, err := handshake(c, secretA, jobA, rankA, size, false, 2*time.Second)
		done <- res{p, err}
	}()
	c, err := dialRetry(ln.Addr().String(), time.Now().Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	peerOfD, errD = handshake(c, secretD, jobD, rankD, size, true, 2*time.Second)
	if errD != nil {
		c.Close() // the acceptor is not left waiting for a proof that will not come
	}
	r := <-done
	c.Close()
	return peerOfD, r.peer, errD, r.err
}

func TestHandshake(t *testing.T) {
	s := bytes.Repeat([]byte{7}, 32)
	pd, pa, ed, ea := pair(t, s, s, "job1", "job1", 0, 3, 4)
	if ed != nil || ea != nil || pd != 3 || pa != 0 {
		t.Fatalf("matching secrets: peers %d/%d, errors %v / %v", pd, pa, ed, ea)
	}
	other := bytes.Repeat([]byte{8}, 32)
	_, _, ed, ea = pair(t, s, other, "job1", "job1", 0, 1, 2)
	if !errors.Is(ed, errBadProof) || !errors.Is(ea, errBadProof) {
		t.Fatalf("different secrets: %v / %v, want bad proof on both ends", ed, ea)
	}
	_, _, ed, ea = pair(t, s, s, "job1", "job2", 0, 1, 2)
	if !errors.Is(ed, errBadProof) || !errors.Is(ea, errBadProof) {
		t.Fatalf("different jobs: %v / %v, want bad proof on both ends", ed, ea)
	}
	_, _, ed, _ = pair(t, s, s, "job1", "job1", 0, 9, 4)
	if ed == nil || !strings.Contains(ed.Error(), "claims rank 9") {
		t.Fatalf("peer claiming rank 9 of 4: %v", ed)
	}
}

// TestHandshakeStalledPeer: a peer that connects and sends nothing (or
// garbage) is given up on at the deadline.
func TestHandshakeStalledPeer(t *testing.T) {
	ln, err := listen("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, garbage := range [][]byte{nil, []byte("GET / HTTP/1.0\r\n\r\n")} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(garbage)
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, err = handshake(s, bytes.Repeat([]byte{1}, 32), "j", 0, 2, false, 200*time.Millisecond)
		if err == nil {
			t.Fatalf("handshake with a peer sending %q succeeded", garbage)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("handshake took %v with a stalled peer", d)
		}
		s.Close()
		c.Close()
	}
}

func TestListenRefusesEveryInterface(t *testing.T) {
	for _, a := range []string{"0.0.0.0", "::", "", "localhost"} {
		if ln, err := listen(a); err == nil {
			ln.Close()
			t.Errorf("listen(%q) succeeded, want an error", a)
		}
	}
}

// fakeBoot is an in-process bootstrap for transports of one test: AllGather
// meets the other ranks through a shared table.
type fakeBoot struct {
	rank, size int
	j          *fakeJob
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
func (b *fakeBoot) Barrier() error   { _, err := b.AllGather(nil); return err }
func (b *fakeBoot) Exit(code int)    { panic(fmt.Sprint("exit ", code)) }
func (b *fakeBoot) Abort(msg string) { panic("abort: " + msg) }
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
	ln, err := listen("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t1.ln = ln
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- t1.acceptFrom([]int{0}, time.Now().Add(5*time.Second)) }()

	c, err := dialRetry(ln.Addr().String(), time.Now().Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_, err = handshake(c, bytes.Repeat([]byte{6}, 32), "testjob", 0, 2, true, 2*time.Second)
	c.Close()
	if !errors.Is(err, errBadProof) {
		t.Fatalf("intruder's handshake: %v, want a bad proof", err)
	}

	t0 := New(cfg)
	t0.b, t0.rank, t0.size, t0.wake, t0.peers = &fakeBoot{rank: 0, size: 2, j: j}, 0, 2, func() {}, make([]*link, 2)
	c, err = dialRetry(ln.Addr().String(), time.Now().Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := handshake(c, secret, "testjob", 0, 2, true, 2*time.Second); err != nil || p != 1 {
		t.Fatalf("rank 0's handshake: peer %d, %v", p, err)
	}
	t0.add(1, c)
	if err := <-accepted; err != nil {
		t.Fatalf("acceptFrom: %v", err)
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
