package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/gexgo/gexgo/internal/auth"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestListenRejectsAllInterfaces(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "[0:0::0]:0"} {
		if l, err := listen(addr, false, ""); err == nil {
			l.Close()
			t.Errorf("listen(%q) accepted an all-interfaces address", addr)
		} else if !strings.Contains(err.Error(), "all interfaces") {
			t.Errorf("listen(%q): %v", addr, err)
		}
	}
	if _, err := listen("127.0.0.1", false, ""); err == nil {
		t.Error("listen without a port accepted")
	}
	l, err := listen(":0", true, "")
	if err != nil {
		t.Fatalf("listen(:0, allowAny): %v", err)
	}
	l.Close()
	l, err = listen("127.0.0.1:0", false, "")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

func TestDialRetry(t *testing.T) {
	l, err := listen("127.0.0.1:0", false, "")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens yet
	type res struct {
		c   *net.TCPConn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := dial(addr, time.Now().Add(5*time.Second), "")
		ch <- res{c, err}
	}()
	time.Sleep(200 * time.Millisecond)
	l, err = listen(addr, false, "")
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	defer l.Close()
	r := <-ch
	if r.err != nil {
		t.Fatalf("dial with retry: %v", r.err)
	}
	r.c.Close()
}

func TestDialDeadline(t *testing.T) {
	l, err := listen("127.0.0.1:0", false, "")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	_, err = dial(addr, start.Add(300*time.Millisecond), "")
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("dial to a closed port: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("dial gave up after %v, deadline was 300ms", el)
	}
	t.Logf("%v", err)
}

// TestAcceptLoop: authenticated dialers are handed over with their ranks; a
// dialer with the wrong secret and one that stalls are logged and closed; the
// loop ends when the listener closes.
func TestAcceptLoop(t *testing.T) {
	l, err := listen("127.0.0.1:0", false, "")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	p := params(1, testSecret, "j")
	p.Timeout = 300 * time.Millisecond
	var mu sync.Mutex
	var got []int
	var logs []string
	done := make(chan error, 1)
	go func() {
		done <- acceptLoop(l, p, func(c *net.TCPConn, r int) {
			mu.Lock()
			got = append(got, r)
			mu.Unlock()
			c.Close()
		}, func(format string, args ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(format, args...))
			mu.Unlock()
		})
	}()
	stall, err := net.Dial("tcp", addr) // never speaks
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	deadline := time.Now().Add(5 * time.Second)
	for _, r := range []int{0, 2, 3} {
		c, err := dialAuth(addr, deadline, params(r, testSecret, "j"), 1, "")
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		c.Close()
	}
	if _, err := dialAuth(addr, deadline, params(0, []byte("a different secret, 32 bytes ..."), "j"), 1, ""); reason(err) != auth.ReasonBadProof {
		t.Fatalf("wrong secret: %v", err)
	}
	time.Sleep(600 * time.Millisecond) // the stalled handshake times out
	l.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("acceptLoop: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("acceptLoop did not return after the listener closed")
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 2, 3}) {
		t.Fatalf("handed over ranks %v, want [0 2 3]", got)
	}
	var timeouts, rejected int
	for _, s := range logs {
		switch {
		case strings.Contains(s, auth.ReasonTimeout):
			timeouts++
		case strings.Contains(s, auth.ReasonRejected):
			rejected++
		}
	}
	if timeouts != 1 || rejected != 1 || len(logs) != 2 {
		t.Fatalf("logs %q: want one timeout and one rejection", logs)
	}
	t.Logf("logged: %q", logs)
}

var testSecret = bytes.Repeat([]byte{0x5A}, auth.SecretLen)

func params(rank int, secret []byte, job string) *auth.Params {
	return &auth.Params{Secret: secret, JobID: job, Rank: rank, Size: 4, Timeout: 2 * time.Second}
}

// reason is the reason of an authentication failure, or "".
func reason(err error) string {
	var ae *auth.AuthError
	if errors.As(err, &ae) {
		return ae.Reason
	}
	return ""
}
