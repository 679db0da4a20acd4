// Package nettest has helpers for tests that need real network connections.
package nettest

import (
	"net"
	"testing"
)

// TCPPair returns both ends of a loopback TCP connection with TCP_NODELAY.
func TCPPair(t testing.TB) (a, b *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			ch <- nil
			return
		}
		ch <- c
	}()
	d, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-ch
	if s == nil {
		t.Fatal("accept failed")
	}
	a, b = d.(*net.TCPConn), s.(*net.TCPConn)
	for _, c := range []*net.TCPConn{a, b} {
		if err := c.SetNoDelay(true); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}
