package ptlnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/auth"
)

// waitStat waits (bounded) until f(n.Stats()) holds.
func waitStat(t *testing.T, n *Net, what string, f func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !f(n.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: stats %+v", what, n.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStrangerUnix: whatever a local process sends on a Net's socket —
// garbage, a hello claiming a pid it does not hold, descriptors that are not
// sealed memfds of the right size — the connection is refused and counted,
// and the Net still works.
func TestStrangerUnix(t *testing.T) {
	c := newCollector()
	n := open(t, PIDAny, c.handle)
	other := open(t, PIDAny, func(Peer, []byte, []byte) {})
	dial := func() *net.UnixConn {
		s, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: unixName(n.ID()), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	memfd := func(size int, seal bool) int {
		fd, err := unix.MemfdCreate("x", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		unix.Ftruncate(fd, int64(size))
		if seal {
			unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
		}
		return fd
	}
	var pipe [2]int
	if err := unix.Pipe(pipe[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	unheld := PhysID{NID: n.ID().NID, PID: 7} // nobody holds it (checked below)
	if _, err := net.Dial("unix", unixName(unheld)); err == nil {
		t.Skip("pid 7 is held on this node")
	}
	cases := []struct {
		name string
		do   func(s *net.UnixConn)
	}{
		{"garbage", func(s *net.UnixConn) { s.Write(bytes.Repeat([]byte{0xff}, 100)) }},
		{"short hello", func(s *net.UnixConn) { s.Write([]byte(helloMagic)) }},
		{"silent then close", func(s *net.UnixConn) {}},
		{"claims an unheld pid", func(s *net.UnixConn) {
			sendHello(s, hello{kind: helloConnect, id: unheld}, memfd(bellRegionSize, true), memfd(txRegionSize, true))
		}},
		{"claims a pid of another process", func(s *net.UnixConn) {
			// other is in this process, so the claim is true; pipes are not memfds.
			sendHello(s, hello{kind: helloConnect, id: other.ID()}, pipe[0], pipe[1])
		}},
		{"unsealed memfds", func(s *net.UnixConn) {
			sendHello(s, hello{kind: helloConnect, id: other.ID()}, memfd(bellRegionSize, false), memfd(txRegionSize, false))
		}},
		{"memfds of the wrong size", func(s *net.UnixConn) {
			sendHello(s, hello{kind: helloConnect, id: other.ID()}, memfd(bellRegionSize, true), memfd(4096, true))
		}},
		{"zeroed memfds", func(s *net.UnixConn) {
			sendHello(s, hello{kind: helloConnect, id: other.ID()}, memfd(bellRegionSize, true), memfd(txRegionSize, true))
		}},
		{"one descriptor", func(s *net.UnixConn) {
			sendHello(s, hello{kind: helloConnect, id: other.ID()}, memfd(bellRegionSize, true))
		}},
	}
	for i, tc := range cases {
		s := dial()
		tc.do(s)
		if tc.name == "silent then close" {
			s.Close()
		}
		waitStat(t, n, tc.name, func(st Stats) bool { return st.Refused == uint64(i+1) })
		s.Close()
	}
	if err := other.Send(n.ID(), []byte("ok"), []byte("still works")); err != nil {
		t.Fatal(err)
	}
	if m := c.wait(t, 1); string(m[0].payload) != "still works" {
		t.Fatalf("got %q", m[0].payload)
	}
	if st := n.Stats(); st.ShmConns != 1 {
		t.Errorf("stats %+v: want exactly the one real connection", st)
	}
}

// TestHostileFrames: a connected peer that writes malformed frames into its
// ring (bad kinds, lengths, buffer indices, a continuation without a start, a
// double free) makes the receiver count and drop them; the frames around them
// arrive.
func TestHostileFrames(t *testing.T) {
	c := newCollector()
	b := open(t, PIDAny, c.handle)
	a := open(t, PIDAny, func(Peer, []byte, []byte) {})
	if err := a.Send(b.ID(), []byte("first"), nil); err != nil {
		t.Fatal(err)
	}
	sc := (*a.routes.Load())[b.ID()].(*shmConn)
	raw := func(fill func(d []byte)) {
		sc.txMu.Lock()
		d, tk, ok := sc.tx.ReserveOne(txEagerMax)
		if !ok {
			t.Fatal("ring full")
		}
		clear(d)
		fill(d)
		sc.tx.Commit(tk)
		sc.peerBell.Ring()
		sc.txMu.Unlock()
	}
	bad := []func(d []byte){
		func(d []byte) { d[0] = 0 },                                                      // kind 0
		func(d []byte) { d[0] = 9 },                                                      // unknown kind
		func(d []byte) { d[0] = slotEager; d[1] = 1 },                                    // reserved byte
		func(d []byte) { d[0] = slotEager; binary.LittleEndian.PutUint16(d[2:], 4000) },  // hdr too long
		func(d []byte) { d[0] = slotEager; binary.LittleEndian.PutUint32(d[4:], 1<<31) }, // payload past the slot
		func(d []byte) { // bulk buffer index out of range
			putBulk(d, true, nil, 10, 0, 10)
			binary.LittleEndian.PutUint32(d[sOffBuf:], txBufs)
		},
		func(d []byte) { putBulk(d, true, nil, 1<<40, 0, 10) },       // total past MaxPayload
		func(d []byte) { putBulk(d, true, nil, 10, 0, txBufSize+1) }, // chunk past the buffer
		func(d []byte) { putBulk(d, false, nil, 0, 1, 10) },          // continuation without a start (and a free of a free buffer)
	}
	for _, f := range bad {
		raw(f)
	}
	if err := a.Send(b.ID(), []byte("last"), []byte("p")); err != nil {
		t.Fatal(err)
	}
	m := c.wait(t, 2)
	if string(m[0].hdr) != "first" || string(m[1].hdr) != "last" || string(m[1].payload) != "p" {
		t.Fatalf("got %q, %q", m[0].hdr, m[1].hdr)
	}
	// The continuation is counted twice: as out of place and as a free of a
	// buffer that was not busy.
	waitStat(t, b, "malformed frames", func(st Stats) bool { return st.Malformed == uint64(len(bad))+1 })
}

// TestTCPRefused: without the job secret, with a wrong one, or with garbage
// instead of the handshake, a TCP connection is refused on the accepting side
// and Send to such a peer fails with ErrUnreachable; an authenticated peer
// that then sends a malformed frame loses its connection, and the Net works on.
func TestTCPRefused(t *testing.T) {
	c := newCollector()
	n, err := Open(Config{PID: PIDAny, ForceTCP: true, Secret: testSecret}, c.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	addr := n.tcpAddr(n.ID())
	other := bytes.Repeat([]byte{7}, 32)
	m, err := Open(Config{PID: PIDAny, ForceTCP: true, Secret: other}, func(Peer, []byte, []byte) {})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Send(n.ID(), nil, nil); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Send with the wrong secret: %v, want ErrUnreachable", err)
	}
	waitStat(t, n, "wrong secret", func(st Stats) bool { return st.Refused == 1 })

	t.Setenv(auth.EnvSecret, "")
	t.Setenv(EnvTCPInsecure, "")
	u, err := Open(Config{PID: PIDAny, ForceTCP: true}, func(Peer, []byte, []byte) {})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if err := u.Send(n.ID(), nil, nil); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Send without a secret: %v, want ErrUnreachable", err)
	}

	g, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	g.Write(bytes.Repeat([]byte("garbage!"), 20))
	waitStat(t, n, "garbage handshake", func(st Stats) bool { return st.Refused == 2 })
	g.Close()

	// An authenticated peer (it knows the secret) sending a bad frame header.
	h := rawTCPPeer(t, n)
	io := make([]byte, helloSize)
	var fh [tcpFrameSize]byte
	putTCPHeader(fh[:], 2, 3)
	h.Write(append(fh[:], "hipay"...)) // one good frame
	putTCPHeader(fh[:], MaxHeaderSize+1, 0)
	h.Write(fh[:]) // then a bad one
	got := c.wait(t, 1)
	if got[0].src.ID.PID != 9 || string(got[0].hdr) != "hi" || string(got[0].payload) != "pay" {
		t.Fatalf("got %+v", got[0])
	}
	waitStat(t, n, "bad frame", func(st Stats) bool { return st.Malformed == 1 })
	h.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := h.Read(io); err == nil {
		t.Error("the connection that sent a bad frame is still open")
	}
}

// TestTCPPeerGone: after a TCP peer closes, Sends to it fail with
// ErrUnreachable (its connection ended and nobody listens for it any more).
func TestTCPPeerGone(t *testing.T) {
	cfg := Config{PID: PIDAny, ForceTCP: true, Secret: testSecret}
	c := newCollector()
	a, err := Open(cfg, func(Peer, []byte, []byte) {})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(cfg, c.handle)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send(b.ID(), []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	c.wait(t, 1)
	b.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := a.Send(b.ID(), []byte("x"), make([]byte, 1000))
		if errors.Is(err, ErrUnreachable) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("Send to a closed TCP peer: %v, want ErrUnreachable within 30 s", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// rawTCPPeer connects to n as an authenticated TCP peer with pid 9 that writes
// frames by hand.
func rawTCPPeer(t *testing.T, n *Net) net.Conn {
	t.Helper()
	h, err := net.Dial("tcp4", n.tcpAddr(n.ID()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	p := &auth.Params{Secret: testSecret, JobID: authJobID, Rank: 9, Size: 1 << 32}
	if _, err := auth.Handshake(h, p, true, int(n.ID().PID)); err != nil {
		t.Fatal(err)
	}
	var hb [helloSize]byte
	hello{kind: helloConnect, id: PhysID{NID: n.ID().NID, PID: 9}, uid: 0}.encode(&hb)
	h.Write(hb[:])
	if _, err := h.Read(hb[:]); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestTCPPolled: while a goroutine keeps polling (so that Poll, not the reader
// goroutine, reads the socket most of the time), frames written in pieces —
// a frame header split across writes, a payload larger than the receive
// buffer trickled in — arrive whole and in order; then a malformed frame is
// counted and drops the connection, and a peer that vanishes inside a frame
// is counted as lost.
func TestTCPPolled(t *testing.T) {
	c := newCollector()
	n, err := Open(Config{PID: PIDAny, ForceTCP: true, Secret: testSecret}, c.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				n.PollStop()
				return
			default:
			}
			n.Poll()
			if i%64 == 63 {
				time.Sleep(10 * time.Microsecond)
			}
		}
	}()
	defer func() { close(stop); <-done }()

	h := rawTCPPeer(t, n)
	frame := func(hdr, payload []byte) []byte {
		var fh [tcpFrameSize]byte
		putTCPHeader(fh[:], len(hdr), uint64(len(payload)))
		return append(append(fh[:], hdr...), payload...)
	}
	small := frame([]byte("h1"), []byte("p1"))
	h.Write(small[:5]) // a frame header in two pieces
	time.Sleep(time.Millisecond)
	h.Write(small[5:])
	big := make([]byte, tcpReadBuf+12345)
	for i := range big {
		big[i] = byte(i * 7)
	}
	bf := frame([]byte("big"), big)
	for len(bf) > 0 {
		k := min(len(bf), 50000)
		h.Write(bf[:k])
		bf = bf[k:]
		time.Sleep(100 * time.Microsecond)
	}
	h.Write(frame([]byte("h3"), nil))
	got := c.wait(t, 3)
	if string(got[0].hdr) != "h1" || string(got[0].payload) != "p1" ||
		string(got[1].hdr) != "big" || !bytes.Equal(got[1].payload, big) ||
		string(got[2].hdr) != "h3" || len(got[2].payload) != 0 {
		t.Fatalf("got %q/%d bytes, %q/%d bytes, %q/%d bytes", got[0].hdr, len(got[0].payload),
			got[1].hdr, len(got[1].payload), got[2].hdr, len(got[2].payload))
	}
	var fh [tcpFrameSize]byte
	putTCPHeader(fh[:], 0, MaxPayload+1)
	h.Write(fh[:])
	waitStat(t, n, "bad frame", func(st Stats) bool { return st.Malformed == 1 })
	h.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := h.Read(fh[:]); err == nil {
		t.Error("the connection that sent a bad frame is still open")
	}

	// A second peer ends inside a frame: lost, not malformed.
	lost := n.Stats().PeersLost
	h2 := rawTCPPeer(t, n)
	h2.Write(frame([]byte("h4"), make([]byte, 100))[:40])
	time.Sleep(time.Millisecond)
	h2.Close()
	waitStat(t, n, "peer lost inside a frame", func(st Stats) bool { return st.PeersLost == lost+1 })
	if st := n.Stats(); st.Malformed != 1 {
		t.Errorf("Malformed = %d, want 1", st.Malformed)
	}
}
