package tcp

import (
	"bytes"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/nettest"
)

// available reports whether the kernel offers congestion control cc to this
// process (net.ipv4.tcp_available_congestion_control).
func available(t *testing.T, cc string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		t.Skipf("cannot read the available congestion controls: %v", err)
	}
	for _, f := range strings.Fields(string(b)) {
		if f == cc {
			return true
		}
	}
	return false
}

// TestCongestionDefault: the conduit's connections use DefaultCongestion
// (CUBIC) whatever the system's default is, and "system" keeps the
// system's.
func TestCongestionDefault(t *testing.T) {
	if !available(t, DefaultCongestion) {
		t.Skipf("the kernel has no %s congestion control", DefaultCongestion)
	}
	t.Setenv("GEX_SECRET", strings.Repeat("ab", 32))
	for _, tc := range []struct{ env, want string }{{"", DefaultCongestion}, {"system", ""}, {DefaultCongestion, DefaultCongestion}} {
		t.Setenv(EnvCongestion, tc.env)
		cfg, err := ConfigFromEnv("job")
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvCongestion, tc.env, err)
		}
		tr, _ := connectedTransport(t, cfg, nil)
		got, err := congestion(tr.peers[0].fd)
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := tc.want
		if want == "" {
			// The system's default: what a plain socket gets.
			a, _ := nettest.TCPPair(t)
			fd, err := takeFD(a)
			if err != nil {
				t.Fatal(err)
			}
			want, err = congestion(fd)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
		}
		if got != want {
			t.Errorf("%s=%q: the connection uses %q, want %q", EnvCongestion, tc.env, got, want)
		}
	}
}

// TestCongestionRefused: a name that cannot be one is refused by
// ConfigFromEnv, naming the variable; a well-formed name the kernel lacks,
// asked for explicitly, fails the connection naming it, while the default
// falls back to the system's.
func TestCongestionRefused(t *testing.T) {
	t.Setenv("GEX_SECRET", strings.Repeat("ab", 32))
	for _, bad := range []string{"cubic reno", "a/b", strings.Repeat("x", 16)} {
		t.Setenv(EnvCongestion, bad)
		if _, err := ConfigFromEnv("job"); err == nil || !strings.Contains(err.Error(), EnvCongestion) {
			t.Errorf("%s=%q: err %v, want an error naming %s", EnvCongestion, bad, err, EnvCongestion)
		}
	}
	const missing = "nosuchcc"
	t.Setenv(EnvCongestion, missing)
	cfg, err := ConfigFromEnv("job")
	if err != nil {
		t.Fatal(err)
	}
	tr := New(cfg)
	tr.peers = make([]*link, 2)
	a, _ := nettest.TCPPair(t)
	if err := tr.add(1, a); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("an unknown congestion control asked for: err %v, want one naming %q", err, missing)
	}
	cfg.congestionSet = false // the same name as a default: fall back
	tr = New(cfg)
	tr.peers = make([]*link, 2)
	a, _ = nettest.TCPPair(t)
	if err := tr.add(1, a); err != nil {
		t.Errorf("an unavailable default congestion control failed the connection: %v", err)
	} else {
		unix.Close(tr.peers[1].fd)
	}
}

// TestNotSentLowat: the conduit's connections carry TCP_NOTSENT_LOWAT,
// DefaultNotSentLowat unless GEX_TCP_NOTSENT_LOWAT says otherwise (0: none,
// the kernel's default); malformed values are refused naming the variable.
func TestNotSentLowat(t *testing.T) {
	t.Setenv("GEX_SECRET", strings.Repeat("ab", 32))
	// The kernel's value on a socket that was not given one.
	a, _ := nettest.TCPPair(t)
	fd, err := takeFD(a)
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
	unix.Close(fd)
	if err != nil {
		t.Skipf("TCP_NOTSENT_LOWAT cannot be read here: %v", err)
	}
	for _, tc := range []struct {
		env  string
		want int
	}{{"", DefaultNotSentLowat}, {"65536", 65536}, {"0", kernel}} {
		t.Setenv(EnvNotSentLowat, tc.env)
		cfg, err := ConfigFromEnv("job")
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvNotSentLowat, tc.env, err)
		}
		tr, _ := connectedTransport(t, cfg, nil)
		got, err := unix.GetsockoptInt(tr.peers[0].fd, unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
		tr.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s=%q: the connection's TCP_NOTSENT_LOWAT is %d, want %d", EnvNotSentLowat, tc.env, got, tc.want)
		}
	}
	for _, bad := range []string{"-1", "lots", "2147483648", "1e6"} {
		t.Setenv(EnvNotSentLowat, bad)
		if _, err := ConfigFromEnv("job"); err == nil || !strings.Contains(err.Error(), EnvNotSentLowat) {
			t.Errorf("%s=%q: error %v, want one naming the variable", EnvNotSentLowat, bad, err)
		}
	}
}

// otherCongestion returns a congestion control the kernel offers that is not
// the system's default (what a plain socket gets), or skips.
func otherCongestion(t *testing.T) string {
	t.Helper()
	a, _ := nettest.TCPPair(t)
	fd, err := takeFD(a)
	if err != nil {
		t.Fatal(err)
	}
	system, err := congestion(fd)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	for _, cc := range []string{"reno", "cubic"} {
		if cc != system && available(t, cc) {
			return cc
		}
	}
	t.Skipf("no congestion control other than the system's %q is available", system)
	return ""
}

// TestCongestionBeforeConnect: the congestion control is set on every
// socket before it connects or listens - the listener's (accepted
// connections inherit it) and the dialer's - not only once the connection
// is up: a connection set up under BBR keeps BBR's pacing after switching
// to CUBIC (presetCongestion). Checked on the sockets as Start makes them
// (each seen before connect or listen, through presetHook) and on
// listenCC's and dialCC's connections without tuneSocket.
func TestCongestionBeforeConnect(t *testing.T) {
	cc := otherCongestion(t)
	var mu sync.Mutex
	var seen []string
	presetHook = func(fd int) {
		got, err := congestion(fd)
		if err != nil {
			got = err.Error()
		}
		mu.Lock()
		seen = append(seen, got)
		mu.Unlock()
	}
	defer func() { presetHook = nil }()

	cfg := Config{Secret: bytes.Repeat([]byte{5}, 32), JobID: "testjob", Addr: "127.0.0.1", Timeout: 5 * time.Second, MaxPayload: 1 << 16, Congestion: cc}
	j := newFakeJob(2)
	trs := []*Transport{New(cfg), New(cfg)}
	errs := make(chan error, 2)
	for r, tr := range trs {
		go func() {
			errs <- tr.Start(&fakeBoot{rank: r, size: 2, j: j}, []bool{r != 0, r != 1}, func() {}, nil)
		}()
	}
	for range trs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, tr := range trs {
		tr.Close()
	}
	mu.Lock()
	// Two listeners and one dialing socket (rank 0 dials rank 1).
	if len(seen) < 3 {
		t.Errorf("the congestion control was set before connect or listen on %d sockets, want 3 (2 listeners, 1 dialer)", len(seen))
	}
	for _, got := range seen {
		if got != cc {
			t.Errorf("a socket had %q before it connected or listened, want %q", got, cc)
		}
	}
	mu.Unlock()

	ln, err := listen("127.0.0.1:0", false, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	dc, err := dial(ln.Addr().String(), time.Now().Add(5*time.Second), cc)
	if err != nil {
		t.Fatal(err)
	}
	ac := <-accepted
	if ac == nil {
		t.Fatal("accept failed")
	}
	for name, c := range map[string]net.Conn{"dialed": dc, "accepted": ac} {
		fd, err := takeFD(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := congestion(fd)
		unix.Close(fd)
		if err != nil || got != cc {
			t.Errorf("the %s connection uses %q (%v), want %q", name, got, err, cc)
		}
	}
}
