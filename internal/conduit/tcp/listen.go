package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/auth"
)

// listen listens for TCP on addr ("host:port", port 0 = any free port). The
// host must name the job's chosen interface: an empty or unspecified host
// ("", "0.0.0.0", "::") listens on every interface and is refused unless
// allowAny, so that a rank is reachable only where the job meant it to be.
// The congestion control cc ("" keeps the system's) is set on the listening
// socket, which the accepted connections inherit from their first segment
// on (see presetCongestion).
func listen(addr string, allowAny bool, cc string) (*net.TCPListener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen address %q: %w", addr, err)
	}
	if !allowAny {
		if host == "" {
			return nil, fmt.Errorf("tcp: listen address %q has no host: it would listen on all interfaces; name the job's interface address", addr)
		}
		if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
			return nil, fmt.Errorf("tcp: listen address %q is unspecified (%s): it would listen on all interfaces; name the job's interface address", addr, host)
		}
	}
	lc := net.ListenConfig{Control: presetCongestion(cc)}
	l, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen on %s: %w", addr, err)
	}
	return l.(*net.TCPListener), nil
}

// Dial retry backoff bounds.
const (
	dialBackoffMin = 10 * time.Millisecond
	dialBackoffMax = 500 * time.Millisecond
)

// dial connects to addr, retrying (with backoff) while the peer is not yet
// listening, until deadline. The returned connection has TCP_NODELAY set. The
// error names the address, the number of attempts and the last failure.
// The congestion control cc ("" keeps the system's) is set on the socket
// before it connects (see presetCongestion).
func dial(addr string, deadline time.Time, cc string) (*net.TCPConn, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	d := net.Dialer{Control: presetCongestion(cc)}
	backoff := dialBackoffMin
	var last error
	for attempt := 1; ; attempt++ {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			tc := c.(*net.TCPConn)
			if err := tc.SetNoDelay(true); err != nil {
				tc.Close()
				return nil, fmt.Errorf("tcp: dial %s: setting TCP_NODELAY: %w", addr, err)
			}
			return tc, nil
		}
		if ctx.Err() == nil || last == nil {
			last = err
		}
		var dnsErr *net.DNSError
		var addrErr *net.AddrError
		if errors.As(err, &addrErr) || (errors.As(err, &dnsErr) && dnsErr.IsNotFound) {
			return nil, fmt.Errorf("tcp: dial %s: %w", addr, err) // retrying cannot help
		}
		wait := min(backoff, time.Until(deadline))
		if wait <= 0 {
			return nil, fmt.Errorf("tcp: dial %s: gave up after %d attempts at the deadline: %w", addr, attempt, last)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("tcp: dial %s: gave up after %d attempts at the deadline: %w", addr, attempt, last)
		}
		backoff = min(2*backoff, dialBackoffMax)
	}
}

// dialAuth dials the rank expect at addr (retrying until deadline), with the
// congestion control cc set before the socket connects, and runs the
// handshake as the dialer.
func dialAuth(addr string, deadline time.Time, p *auth.Params, expect int, cc string) (*net.TCPConn, error) {
	c, err := dial(addr, deadline, cc)
	if err != nil {
		return nil, err
	}
	if _, err := auth.Handshake(c, p, true, expect); err != nil {
		return nil, err // handshake closed c
	}
	return c, nil
}

// acceptLoop accepts connections on l until l is closed. Each connection
// gets TCP_NODELAY and runs the handshake as acceptor in its own goroutine (a
// stalled peer cannot hold up the others); an authenticated connection is
// handed to handle with the peer's rank, a failed one is closed and the error
// passed to logf. acceptLoop returns nil when l is closed and waits for the
// handshakes in progress (each bounded by p.Timeout) before returning.
func acceptLoop(l net.Listener, p *auth.Params, handle func(c *net.TCPConn, peerRank int), logf func(format string, args ...any)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := 5 * time.Millisecond
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return err
			}
			// Transient (e.g. EMFILE): log, back off, keep accepting.
			logf("tcp: accept on %s: %v", l.Addr(), err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		tc, ok := c.(*net.TCPConn)
		if !ok {
			c.Close()
			logf("tcp: accept on %s: not a TCP connection (%T)", l.Addr(), c)
			continue
		}
		if err := tc.SetNoDelay(true); err != nil {
			tc.Close()
			logf("tcp: accept from %s: setting TCP_NODELAY: %v", tc.RemoteAddr(), err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := auth.Handshake(tc, p, false, -1)
			if err != nil {
				logf("%v", err)
				return
			}
			handle(tc, r)
		}()
	}
}

// presetCongestion returns a net.Dialer / net.ListenConfig Control that sets
// the congestion control cc on the socket before it connects or listens (nil
// for cc ""), so that the connection starts under it. Set only after the
// connection is established (tuneSocket, which still sets and checks it), it
// comes too late: the connection was initialised under the system's default,
// and when that is BBR, BBR's initialisation turns on TCP's internal pacing
// (sk_pacing_status), which switching to CUBIC does not turn off. Such a
// connection's put-flood writer met writes refused (TCP_NOTSENT_LOWAT) with
// three full segments unsent, nothing in flight and both windows open, for
// hundreds of microseconds - 30 to 160 times per job; with the congestion
// control set first, none (docs/tcp.md, sixth campaign). Failing here is not
// an error: tuneSocket decides.
func presetCongestion(cc string) func(network, address string, c syscall.RawConn) error {
	if cc == "" {
		return nil
	}
	return func(_, _ string, c syscall.RawConn) error {
		c.Control(func(fd uintptr) {
			unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
			if presetHook != nil {
				presetHook(int(fd))
			}
		})
		return nil
	}
}

// presetHook, if set (tests), runs in presetCongestion's Control on every
// socket, before it connects or listens.
var presetHook func(fd int)
