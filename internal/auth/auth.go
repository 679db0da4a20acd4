// Package auth is the per-job secret and the mutual challenge-response every
// network connection of a job runs before anything else: the tcp conduit's
// connections between ranks, and ranks joining the launcher's bootstrap over
// TCP (ssh-spawned ranks). The launcher makes the secret (NewSecret) and
// passes it to every rank in EnvSecret.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// EnvSecret is the environment variable through which the launcher passes the
// job's secret (hex) to every rank.
const EnvSecret = "GEX_SECRET"

// SecretLen is the length of a job secret in bytes.
const SecretLen = 32

// NewSecret returns a fresh random job secret of SecretLen bytes.
func NewSecret() ([]byte, error) {
	s := make([]byte, SecretLen)
	if _, err := rand.Read(s); err != nil {
		return nil, fmt.Errorf("tcp: generating the job secret: %w", err)
	}
	return s, nil
}

// EncodeSecret returns the secret as lowercase hex (for EnvSecret).
func EncodeSecret(s []byte) string { return hex.EncodeToString(s) }

// DecodeSecret parses a hex secret as EncodeSecret writes it; it must decode
// to exactly SecretLen bytes.
func DecodeSecret(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("tcp: job secret is not hex: %w", err)
	}
	if len(b) != SecretLen {
		return nil, fmt.Errorf("tcp: job secret is %d bytes, want %d", len(b), SecretLen)
	}
	return b, nil
}

// SecretFromEnv reads and decodes EnvSecret.
func SecretFromEnv() ([]byte, error) {
	v, ok := os.LookupEnv(EnvSecret)
	if !ok || v == "" {
		return nil, fmt.Errorf("tcp: %s is not set (the launcher passes the job secret in it)", EnvSecret)
	}
	b, err := DecodeSecret(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvSecret, err)
	}
	return b, nil
}

// The handshake. Every connection between two ranks runs it right after
// connect/accept, before any frame. The dialer speaks first and the two sides
// strictly alternate (so it works on an unbuffered net.Pipe too):
//
//  1. dialer → acceptor: hello(dialer's nonce, job id, dialer's rank)
//  2. acceptor → dialer: hello(acceptor's nonce, job id, acceptor's rank), proof_A
//  3. dialer → acceptor: proof_D
//  4. acceptor → dialer: ack (1 byte, authOK)
//
// proof_X = HMAC-SHA256(secret, label_X || nonce_D || nonce_A || rank_D ||
// rank_A || job id), label_X naming the role, so that a proof cannot be
// reflected back to its maker, and fresh nonces on both sides make every
// transcript useless on any other connection.
//
// hello layout:
//
//	off size field
//	0   4    magic "GEXA"
//	4   1    version (authVersion)
//	5   1    role: 0 dialer, 1 acceptor
//	6   1    job id length (0..maxJobID)
//	7   1    reserved, 0
//	8   4    rank (uint32 LE)
//	12  32   nonce
//	44  n    job id
const (
	authMagic   = "GEXA"
	authVersion = 1
	hOffVersion = 4
	hOffRole    = 5
	hOffJobLen  = 6
	hOffRank    = 8
	hOffNonce   = 12
	hOffJob     = 44
	nonceLen    = 32
	proofLen    = sha256.Size
	maxJobID    = 255
	authOK      = 0x4B // 'K'

	roleDialer   = 0
	roleAcceptor = 1

	labelDialer   = "gexgo tcp auth v1 dialer"
	labelAcceptor = "gexgo tcp auth v1 acceptor"

	// DefaultHandshakeTimeout bounds each read and write of the handshake.
	DefaultHandshakeTimeout = 5 * time.Second
)

// Reasons an AuthError gives.
const (
	ReasonBadProof  = "bad proof"
	ReasonTimeout   = "timeout"
	ReasonWrongJob  = "wrong job"
	ReasonBadRank   = "rank out of range"
	ReasonWrongPeer = "unexpected rank"
	ReasonProtocol  = "protocol error"
	ReasonClosed    = "connection closed"
	ReasonRejected  = "rejected by peer"
	ReasonConfig    = "bad configuration"
)

// ErrAuth is wrapped by every AuthError.
var ErrAuth = errors.New("tcp: handshake failed")

// AuthError says which peer failed the handshake and why.
type AuthError struct {
	Peer   string // remote address
	Reason string // one of the Reason constants
	Detail string // more words, may be empty
	Err    error  // underlying error (I/O), may be nil
}

func (e *AuthError) Error() string {
	s := fmt.Sprintf("tcp: handshake with %s failed: %s", e.Peer, e.Reason)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrAuth and the underlying error.
func (e *AuthError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrAuth, e.Err}
	}
	return []error{ErrAuth}
}

// Params are what one rank brings to every handshake.
type Params struct {
	Secret  []byte        // the job secret (>= 16 bytes)
	JobID   string        // the job's id (boot.Bootstrap.JobID), at most maxJobID bytes
	Rank    int           // this rank
	Size    int           // job size: a peer's rank must be in [0, Size)
	Timeout time.Duration // per read/write; <= 0: DefaultHandshakeTimeout
	Rand    io.Reader     // nonce source; nil: crypto/rand (tests make it deterministic)
}

// handshake authenticates c: it proves this rank knows p.Secret and checks
// that the peer does too, for the same job, and returns the peer's rank. The
// dialer side passes dialer true and may pass expect >= 0, the rank it meant
// to reach; the acceptor passes expect -1. On failure c is closed and the
// error is an *AuthError naming the peer's address and the reason. On success
// c's deadlines are cleared.
func Handshake(c net.Conn, p *Params, dialer bool, expect int) (peerRank int, err error) {
	peer := "?"
	if a := c.RemoteAddr(); a != nil {
		peer = a.String()
	}
	fail := func(reason, detail string, e error) (int, error) {
		c.Close()
		if e != nil && errors.Is(e, os.ErrDeadlineExceeded) {
			reason = ReasonTimeout
		} else if e != nil && (errors.Is(e, io.EOF) || errors.Is(e, io.ErrUnexpectedEOF) || errors.Is(e, net.ErrClosed)) && reason == ReasonProtocol {
			reason = ReasonClosed
		}
		return -1, &AuthError{Peer: peer, Reason: reason, Detail: detail, Err: e}
	}
	if len(p.Secret) < 16 || len(p.JobID) > maxJobID || p.Size <= 0 || p.Rank < 0 || p.Rank >= p.Size || uint64(p.Size) > 1<<32 {
		return fail(ReasonConfig, fmt.Sprintf("secret of %d bytes (>= 16), job id of %d bytes (<= %d), rank %d of %d", len(p.Secret), len(p.JobID), maxJobID, p.Rank, p.Size), nil)
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultHandshakeTimeout
	}
	rnd := p.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	var mine [nonceLen]byte
	if _, err := io.ReadFull(rnd, mine[:]); err != nil {
		return fail(ReasonConfig, "reading a nonce", err)
	}
	write := func(b []byte) error {
		if err := c.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		_, err := c.Write(b)
		return err
	}
	read := func(b []byte) error {
		if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		_, err := io.ReadFull(c, b)
		return err
	}
	// readHello reads and checks the peer's hello.
	readHello := func(role byte) (rank int, nonce [nonceLen]byte, reason, detail string, err error) {
		var h [hOffJob + maxJobID]byte
		if err = read(h[:hOffJob]); err != nil {
			return 0, nonce, ReasonProtocol, "reading hello", err
		}
		switch {
		case string(h[:4]) != authMagic:
			return 0, nonce, ReasonProtocol, fmt.Sprintf("bad magic % x", h[:4]), nil
		case h[hOffVersion] != authVersion:
			return 0, nonce, ReasonProtocol, fmt.Sprintf("handshake version %d, this side speaks %d", h[hOffVersion], authVersion), nil
		case h[hOffRole] != role:
			return 0, nonce, ReasonProtocol, fmt.Sprintf("peer role %d, want %d", h[hOffRole], role), nil
		case h[7] != 0:
			return 0, nonce, ReasonProtocol, "reserved byte set", nil
		}
		jl := int(h[hOffJobLen])
		if err = read(h[hOffJob : hOffJob+jl]); err != nil {
			return 0, nonce, ReasonProtocol, "reading hello job id", err
		}
		if string(h[hOffJob:hOffJob+jl]) != p.JobID {
			return 0, nonce, ReasonWrongJob, fmt.Sprintf("peer is in job %q, this is job %q", h[hOffJob:hOffJob+jl], p.JobID), nil
		}
		r := binary.LittleEndian.Uint32(h[hOffRank:])
		if uint64(r) >= uint64(p.Size) {
			return 0, nonce, ReasonBadRank, fmt.Sprintf("peer claims rank %d, job size %d", r, p.Size), nil
		}
		if expect >= 0 && int(r) != expect {
			return 0, nonce, ReasonWrongPeer, fmt.Sprintf("peer claims rank %d, dialed rank %d", r, expect), nil
		}
		copy(nonce[:], h[hOffNonce:hOffJob])
		return int(r), nonce, "", "", nil
	}
	var msg [hOffJob + maxJobID + proofLen]byte
	if dialer {
		n := putHello(msg[:], roleDialer, p.Rank, &mine, p.JobID)
		if err := write(msg[:n]); err != nil {
			return fail(ReasonProtocol, "writing hello", err)
		}
		r, theirs, reason, detail, err := readHello(roleAcceptor)
		if reason != "" {
			return fail(reason, detail, err)
		}
		var want, got [proofLen]byte
		proof(want[:0], p.Secret, labelAcceptor, &mine, &theirs, p.Rank, r, p.JobID)
		if err := read(got[:]); err != nil {
			return fail(ReasonProtocol, "reading proof", err)
		}
		if !hmac.Equal(want[:], got[:]) {
			return fail(ReasonBadProof, fmt.Sprintf("acceptor claiming rank %d does not know the job secret", r), nil)
		}
		proof(got[:0], p.Secret, labelDialer, &mine, &theirs, p.Rank, r, p.JobID)
		if err := write(got[:]); err != nil {
			return fail(ReasonProtocol, "writing proof", err)
		}
		var ack [1]byte
		if err := read(ack[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fail(ReasonRejected, "the acceptor closed the connection after our proof (different secret?)", err)
			}
			return fail(ReasonProtocol, "reading ack", err)
		}
		if ack[0] != authOK {
			return fail(ReasonProtocol, fmt.Sprintf("bad ack %#02x", ack[0]), nil)
		}
		peerRank = r
	} else {
		r, theirs, reason, detail, err := readHello(roleDialer)
		if reason != "" {
			return fail(reason, detail, err)
		}
		n := putHello(msg[:], roleAcceptor, p.Rank, &mine, p.JobID)
		proof(msg[n:n], p.Secret, labelAcceptor, &theirs, &mine, r, p.Rank, p.JobID)
		if err := write(msg[:n+proofLen]); err != nil {
			return fail(ReasonProtocol, "writing hello", err)
		}
		var want, got [proofLen]byte
		if err := read(got[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fail(ReasonRejected, fmt.Sprintf("dialer claiming rank %d hung up instead of proving (it rejected our proof: different secret?)", r), err)
			}
			return fail(ReasonProtocol, "reading proof", err)
		}
		proof(want[:0], p.Secret, labelDialer, &theirs, &mine, r, p.Rank, p.JobID)
		if !hmac.Equal(want[:], got[:]) {
			return fail(ReasonBadProof, fmt.Sprintf("dialer claiming rank %d does not know the job secret", r), nil)
		}
		if err := write([]byte{authOK}); err != nil {
			return fail(ReasonProtocol, "writing ack", err)
		}
		peerRank = r
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return fail(ReasonProtocol, "clearing deadlines", err)
	}
	return peerRank, nil
}

// putHello writes a hello into b and returns its length.
func putHello(b []byte, role byte, rank int, nonce *[nonceLen]byte, job string) int {
	copy(b, authMagic)
	b[hOffVersion] = authVersion
	b[hOffRole] = role
	b[hOffJobLen] = byte(len(job))
	b[7] = 0
	binary.LittleEndian.PutUint32(b[hOffRank:], uint32(rank))
	copy(b[hOffNonce:], nonce[:])
	copy(b[hOffJob:], job)
	return hOffJob + len(job)
}

// proof appends HMAC-SHA256(secret, label || 0 || nonceD || nonceA || rankD ||
// rankA || job) to dst.
func proof(dst, secret []byte, label string, nonceD, nonceA *[nonceLen]byte, rankD, rankA int, job string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write(nonceD[:])
	m.Write(nonceA[:])
	var r [8]byte
	binary.LittleEndian.PutUint32(r[0:], uint32(rankD))
	binary.LittleEndian.PutUint32(r[4:], uint32(rankA))
	m.Write(r[:])
	m.Write([]byte(job))
	return m.Sum(dst)
}
