package tcp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/boot"
)

// EnvSecret carries the job secret (hex), set by the launcher.
const EnvSecret = boot.EnvSecret

// listen listens on addr (an IP address, port chosen by the kernel). An
// address that means "every interface" is refused: the job's sockets are
// reachable on the job's network only.
func listen(addr string) (net.Listener, error) {
	ip := net.ParseIP(addr)
	if ip == nil {
		return nil, fmt.Errorf("tcp: listen address %q is not an IP address", addr)
	}
	if ip.IsUnspecified() {
		return nil, fmt.Errorf("tcp: refusing to listen on %s (every interface): set %s to this host's address on the job's network", addr, EnvAddr)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		return nil, fmt.Errorf("tcp: listening on %s: %w", addr, err)
	}
	return ln, nil
}

// dialRetry dials addr until it answers or deadline passes.
func dialRetry(addr string, deadline time.Time) (net.Conn, error) {
	wait := 5 * time.Millisecond
	for {
		d := net.Dialer{Deadline: deadline}
		c, err := d.Dial("tcp", addr)
		if err == nil {
			setNoDelay(c)
			return c, nil
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, err
		}
		time.Sleep(wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// setNoDelay turns Nagle's algorithm off: AMs are latency-bound.
func setNoDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
}

// sendBufferFull reports whether n more bytes would not fit in c's kernel
// send buffer now (FlagImmediate's backpressure): the bytes queued (SIOCOUTQ)
// plus n exceed SO_SNDBUF.
func sendBufferFull(c net.Conn, n int) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	full := false
	rc.Control(func(fd uintptr) {
		queued, err1 := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
		size, err2 := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		full = err1 == nil && err2 == nil && queued+n > size
	})
	return full
}

// The handshake: each side sends a 32-byte random nonce and its claimed
// rank; then each sends HMAC-SHA256(secret, label | job id | dialer's nonce |
// acceptor's nonce | its own rank | its role) and checks the other's with
// hmac.Equal. Fresh nonces on both sides make a recorded transcript useless
// on another connection. Every read and write has a deadline.
const (
	nonceLen  = 32
	helloLen  = nonceLen + 4
	proofLen  = sha256.Size
	authLabel = "gexgo tcp conduit v1"
)

// handshake proves the job secret to the peer on c and checks the peer's
// proof; it returns the peer's rank (in [0, size)).
func handshake(c net.Conn, secret []byte, jobID string, myRank, size int, dialer bool, timeout time.Duration) (int, error) {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	var mine [helloLen]byte
	if _, err := rand.Read(mine[:nonceLen]); err != nil {
		return -1, err
	}
	binary.LittleEndian.PutUint32(mine[nonceLen:], uint32(myRank))
	if _, err := c.Write(mine[:]); err != nil {
		return -1, fmt.Errorf("sending the nonce: %w", err)
	}
	var theirs [helloLen]byte
	if _, err := io.ReadFull(c, theirs[:]); err != nil {
		return -1, fmt.Errorf("reading the peer's nonce: %w", err)
	}
	peer := int(binary.LittleEndian.Uint32(theirs[nonceLen:]))
	if peer < 0 || peer >= size || peer == myRank {
		return -1, fmt.Errorf("the peer claims rank %d (job of %d ranks, this is rank %d)", peer, size, myRank)
	}
	dn, an := mine[:nonceLen], theirs[:nonceLen]
	if !dialer {
		dn, an = an, dn
	}
	if _, err := c.Write(proof(secret, jobID, dn, an, myRank, dialer)); err != nil {
		return -1, fmt.Errorf("sending the proof: %w", err)
	}
	var got [proofLen]byte
	if _, err := io.ReadFull(c, got[:]); err != nil {
		return -1, fmt.Errorf("reading the peer's proof: %w", err)
	}
	if !hmac.Equal(got[:], proof(secret, jobID, dn, an, peer, !dialer)) {
		return -1, errBadProof
	}
	return peer, nil
}

var errBadProof = errors.New("the peer did not prove the job secret (bad proof)")

func proof(secret []byte, jobID string, dialerNonce, acceptorNonce []byte, rank int, dialer bool) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(authLabel))
	m.Write([]byte{0})
	m.Write([]byte(jobID))
	m.Write([]byte{0})
	m.Write(dialerNonce)
	m.Write(acceptorNonce)
	var b [5]byte
	binary.LittleEndian.PutUint32(b[:], uint32(rank))
	if dialer {
		b[4] = 1
	}
	m.Write(b[:])
	return m.Sum(nil)
}
