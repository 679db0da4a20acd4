package auth

import (
	"bytes"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/nettest"
)

var testSecret = bytes.Repeat([]byte{0x5A}, SecretLen)

func params(rank int, secret []byte, job string) *Params {
	return &Params{Secret: secret, JobID: job, Rank: rank, Size: 4, Timeout: 2 * time.Second}
}

type result struct {
	rank int
	err  error
}

// runPair runs the handshake on both ends of a loopback TCP connection: the
// dialer with pd (expecting rank expect), the acceptor with pa.
func runPair(t *testing.T, pd, pa *Params, expect int) (d, a result) {
	t.Helper()
	dc, ac := nettest.TCPPair(t)
	ch := make(chan result, 1)
	go func() {
		r, err := Handshake(ac, pa, false, -1)
		ch <- result{r, err}
	}()
	r, err := Handshake(dc, pd, true, expect)
	return result{r, err}, <-ch
}

func reason(err error) string {
	var ae *AuthError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return ""
}

func TestHandshakeOK(t *testing.T) {
	for _, c := range []struct{ d, a int }{{0, 1}, {1, 0}, {3, 2}} {
		d, a := runPair(t, params(c.d, testSecret, "job-1"), params(c.a, testSecret, "job-1"), c.a)
		if d.err != nil || a.err != nil || d.rank != c.a || a.rank != c.d {
			t.Fatalf("rank %d dials rank %d: dialer got (%d, %v), acceptor got (%d, %v)", c.d, c.a, d.rank, d.err, a.rank, a.err)
		}
	}
}

// TestHandshakeConnUsable: after the handshake the connection carries frames
// (no leftover bytes, deadlines cleared).
func TestHandshakeConnUsable(t *testing.T) {
	dc, ac := nettest.TCPPair(t)
	ch := make(chan error, 1)
	go func() {
		_, err := Handshake(ac, params(1, testSecret, "j"), false, -1)
		ch <- err
	}()
	if _, err := Handshake(dc, params(0, testSecret, "j"), true, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	time.Sleep(2200 * time.Millisecond) // past the handshake's 2 s deadline
	if _, err := dc.Write([]byte("first bytes")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("first bytes"))
	if _, err := io.ReadFull(ac, buf); err != nil || string(buf) != "first bytes" {
		t.Fatalf("first bytes after the handshake: %q %v", buf, err)
	}
}

func TestHandshakeWrongSecret(t *testing.T) {
	other := bytes.Repeat([]byte{0xA5}, SecretLen)
	d, a := runPair(t, params(0, testSecret, "j"), params(1, other, "j"), 1)
	if d.err == nil || a.err == nil {
		t.Fatalf("wrong secret accepted: dialer %v, acceptor %v", d.err, a.err)
	}
	if reason(d.err) != ReasonBadProof || reason(a.err) != ReasonRejected || !errors.Is(d.err, ErrAuth) || !errors.Is(a.err, ErrAuth) {
		t.Fatalf("dialer: %v; acceptor: %v", d.err, a.err)
	}
	if !strings.Contains(d.err.Error(), "127.0.0.1:") {
		t.Fatalf("error does not name the peer: %v", d.err)
	}
	t.Logf("dialer: %v\nacceptor: %v", d.err, a.err)
}

func TestHandshakeWrongJob(t *testing.T) {
	d, a := runPair(t, params(0, testSecret, "job-a"), params(1, testSecret, "job-b"), 1)
	if reason(a.err) != ReasonWrongJob || d.err == nil {
		t.Fatalf("dialer: %v; acceptor: %v", d.err, a.err)
	}
	t.Logf("acceptor: %v", a.err)
}

func TestHandshakeWrongPeer(t *testing.T) {
	d, a := runPair(t, params(0, testSecret, "j"), params(2, testSecret, "j"), 1)
	if reason(d.err) != ReasonWrongPeer || a.err == nil {
		t.Fatalf("dialer: %v; acceptor: %v", d.err, a.err)
	}
}

// rawServer runs the acceptor side against a raw client connection.
func rawServer(t *testing.T, timeout time.Duration) (client net.Conn, done chan result) {
	dc, ac := nettest.TCPPair(t)
	p := params(1, testSecret, "j")
	p.Timeout = timeout
	done = make(chan result, 1)
	go func() {
		r, err := Handshake(ac, p, false, -1)
		done <- result{r, err}
	}()
	return dc, done
}

func waitResult(t *testing.T, done chan result, within time.Duration) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(within):
		t.Fatalf("handshake still running after %v", within)
	}
	return result{}
}

func TestHandshakeRankOutOfRange(t *testing.T) {
	c, done := rawServer(t, time.Second)
	var nonce [nonceLen]byte
	msg := make([]byte, hOffJob+1)
	putHello(msg, roleDialer, 7, &nonce, "j") // job size is 4
	c.Write(msg)
	if r := waitResult(t, done, 5*time.Second); reason(r.err) != ReasonBadRank {
		t.Fatalf("rank 7 of 4: %v", r.err)
	}
}

func TestHandshakeGarbage(t *testing.T) {
	c, done := rawServer(t, time.Second)
	c.Write(bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 10))
	if r := waitResult(t, done, 5*time.Second); reason(r.err) != ReasonProtocol {
		t.Fatalf("garbage: %v", r.err)
	}
	// The server closed the connection.
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 100)); err == nil {
		t.Fatal("connection still open after a failed handshake")
	}
}

func TestHandshakeStall(t *testing.T) {
	for _, part := range []int{0, 10, hOffJob + 1} { // nothing, half a hello, a hello and no proof
		c, done := rawServer(t, 300*time.Millisecond)
		var nonce [nonceLen]byte
		msg := make([]byte, hOffJob+1)
		putHello(msg, roleDialer, 0, &nonce, "j")
		c.Write(msg[:part])
		start := time.Now()
		r := waitResult(t, done, 5*time.Second)
		if reason(r.err) != ReasonTimeout {
			t.Fatalf("client stalling after %d bytes: %v", part, r.err)
		}
		t.Logf("stall after %d bytes: %v after %v", part, r.err, time.Since(start).Round(time.Millisecond))
	}
}

// recConn records what is read from and written to a connection.
type recConn struct {
	net.Conn
	in, out bytes.Buffer
}

func (r *recConn) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.in.Write(p[:n])
	return n, err
}

func (r *recConn) Write(p []byte) (int, error) {
	r.out.Write(p)
	return r.Conn.Write(p)
}

// TestHandshakeReplay: a transcript recorded from a successful connection is
// useless on another one, in either role, because the other side's nonce is
// fresh.
func TestHandshakeReplay(t *testing.T) {
	dc, ac := nettest.TCPPair(t)
	rd := &recConn{Conn: dc}
	ch := make(chan error, 1)
	go func() {
		_, err := Handshake(ac, params(1, testSecret, "j"), false, -1)
		ch <- err
	}()
	if _, err := Handshake(rd, params(0, testSecret, "j"), true, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	dialerBytes, acceptorBytes := rd.out.Bytes(), rd.in.Bytes()

	// Replay the dialer's side to a new acceptor.
	c, done := rawServer(t, time.Second)
	c.Write(dialerBytes)
	if r := waitResult(t, done, 5*time.Second); reason(r.err) != ReasonBadProof {
		t.Fatalf("replayed dialer transcript: %v", r.err)
	}

	// Replay the acceptor's side to a new dialer.
	d2, a2 := nettest.TCPPair(t)
	go func() {
		io.ReadFull(a2, make([]byte, hOffJob+1)) // the dialer's hello
		a2.Write(acceptorBytes)
	}()
	if _, err := Handshake(d2, params(0, testSecret, "j"), true, 1); reason(err) != ReasonBadProof {
		t.Fatalf("replayed acceptor transcript: %v", err)
	}
}

func TestHandshakeBadConfig(t *testing.T) {
	dc, _ := nettest.TCPPair(t)
	if _, err := Handshake(dc, params(0, []byte("short"), "j"), true, -1); reason(err) != ReasonConfig {
		t.Fatalf("5-byte secret: %v", err)
	}
	dc, _ = nettest.TCPPair(t)
	if _, err := Handshake(dc, params(4, testSecret, "j"), true, -1); reason(err) != ReasonConfig {
		t.Fatalf("rank 4 of 4: %v", err)
	}
}

func TestSecret(t *testing.T) {
	s, err := NewSecret()
	if err != nil || len(s) != SecretLen {
		t.Fatalf("NewSecret: %d bytes, %v", len(s), err)
	}
	s2, _ := NewSecret()
	if bytes.Equal(s, s2) {
		t.Fatal("two secrets are equal")
	}
	enc := EncodeSecret(s)
	if len(enc) != 2*SecretLen {
		t.Fatalf("encoded %q", enc)
	}
	if d, err := DecodeSecret(enc); err != nil || !bytes.Equal(d, s) {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"", "zz", enc[:10], enc + "00"} {
		if _, err := DecodeSecret(bad); err == nil {
			t.Errorf("DecodeSecret(%q) accepted", bad)
		}
	}
	t.Setenv(EnvSecret, enc)
	if d, err := SecretFromEnv(); err != nil || !bytes.Equal(d, s) {
		t.Fatalf("SecretFromEnv: %v", err)
	}
	t.Setenv(EnvSecret, "")
	if _, err := SecretFromEnv(); err == nil || !strings.Contains(err.Error(), EnvSecret) {
		t.Fatalf("empty %s: %v", EnvSecret, err)
	}
}

// fakeConn feeds fixed bytes to a handshake and collects what it writes.
type fakeConn struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (f *fakeConn) Read(p []byte) (int, error)         { return f.in.Read(p) }
func (f *fakeConn) Write(p []byte) (int, error)        { return f.out.Write(p) }
func (f *fakeConn) Close() error                       { return nil }
func (f *fakeConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (f *fakeConn) RemoteAddr() net.Addr               { return &net.TCPAddr{Port: 1} }
func (f *fakeConn) SetDeadline(t time.Time) error      { return nil }
func (f *fakeConn) SetReadDeadline(t time.Time) error  { return nil }
func (f *fakeConn) SetWriteDeadline(t time.Time) error { return nil }

// constReader is a deterministic nonce source.
type constReader byte

func (c constReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

// FuzzHandshakeServer feeds arbitrary client bytes to the acceptor side. It
// must never panic, and may succeed only if the bytes hold a valid hello and
// the dialer's proof over the server's (here deterministic) nonce.
func FuzzHandshakeServer(f *testing.F) {
	const job = "fuzzjob"
	server := func() *Params {
		p := params(1, testSecret, job)
		p.Rand = constReader(0x33)
		return p
	}
	var serverNonce, clientNonce [nonceLen]byte
	constReader(0x33).Read(serverNonce[:])
	constReader(0x77).Read(clientNonce[:])
	// A valid transcript, and corruptions of it.
	valid := make([]byte, hOffJob+len(job))
	putHello(valid, roleDialer, 2, &clientNonce, job)
	valid = proof(valid, testSecret, labelDialer, &clientNonce, &serverNonce, 2, 1, job)
	f.Add(valid)
	f.Add(valid[:hOffJob])
	bad := append([]byte(nil), valid...)
	bad[len(bad)-1] ^= 1
	f.Add(bad)
	f.Add([]byte("GEXA\x01\x00\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &fakeConn{in: bytes.NewReader(b)}
		r, err := Handshake(c, server(), false, -1)
		if err != nil {
			if !errors.Is(err, ErrAuth) {
				t.Fatalf("error not wrapping ErrAuth: %v", err)
			}
			return
		}
		// Success: the input must start with a hello for this job and a correct proof.
		if len(b) < hOffJob || string(b[:4]) != authMagic {
			t.Fatalf("accepted %d bytes without a hello", len(b))
		}
		jl := int(b[hOffJobLen])
		if string(b[hOffJob:hOffJob+jl]) != job || int(binary.LittleEndian.Uint32(b[hOffRank:])) != r || r < 0 || r >= 4 {
			t.Fatalf("accepted a hello for another job or rank: % x", b[:hOffJob+jl])
		}
		var nonce [nonceLen]byte
		copy(nonce[:], b[hOffNonce:])
		want := proof(nil, testSecret, labelDialer, &nonce, &serverNonce, r, 1, job)
		got := b[hOffJob+jl:]
		if len(got) < proofLen || !hmac.Equal(got[:proofLen], want) {
			t.Fatalf("accepted a wrong proof")
		}
	})
}
