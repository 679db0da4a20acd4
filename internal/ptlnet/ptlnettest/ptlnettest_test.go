package ptlnettest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/netns"
	"github.com/gexgo/gexgo/internal/ptlnet"
)

// The test binary re-executed with PTLNETTEST_ROLE runs one side of the
// exchange: "echo" opens pid 77 and answers every message; "ping" sends to
// PTLNETTEST_PEER and prints what comes back.
func TestMain(m *testing.M) {
	switch os.Getenv("PTLNETTEST_ROLE") {
	case "echo":
		var n *ptlnet.Net
		var err error
		n, err = ptlnet.Open(ptlnet.Config{PID: 77}, func(src ptlnet.Peer, hdr, p []byte) {
			n.Send(src.ID, append([]byte("echo:"), hdr...), p)
		})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("READY", n.ID().NID, n.ID().PID)
		bufio.NewReader(os.Stdin).ReadString('\n') // until the parent says stop
		n.Close()
		os.Exit(0)
	case "ping":
		got := make(chan string, 1)
		n, err := ptlnet.Open(ptlnet.Config{PID: ptlnet.PIDAny}, func(src ptlnet.Peer, hdr, p []byte) {
			got <- fmt.Sprintf("%s %s from %v", hdr, p, src.ID)
		})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		var nid, pid uint32
		fmt.Sscan(os.Getenv("PTLNETTEST_PEER"), &nid, &pid)
		if err := n.Send(ptlnet.PhysID{NID: nid, PID: pid}, []byte("hi"), []byte("payload")); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		select {
		case s := <-got:
			fmt.Println("GOT", s, n.Stats().TCPConns)
		case <-time.After(30 * time.Second):
			fmt.Println("ERR no answer")
		}
		n.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestAcrossHosts: a process on host 1 answers one on host 0, over TCP
// authenticated with the hosts' secret; the answer names host 1's nid.
func TestAcrossHosts(t *testing.T) {
	h, err := Setup(2)
	if errors.Is(err, netns.ErrUnavailable) {
		t.Skipf("needs network namespaces: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	echo := h.Command(1, bin, []string{"-test.run=^$"}, "PTLNETTEST_ROLE=echo")
	in, _ := echo.StdinPipe()
	out, _ := echo.StdoutPipe()
	echo.Stderr = os.Stderr
	if err := echo.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { in.Close(); echo.Wait() }()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "READY") {
		t.Fatalf("echo said %q", sc.Text())
	}
	if want := fmt.Sprintf("READY %d 77", h.NID(1)); sc.Text() != want {
		t.Fatalf("echo said %q, want %q", sc.Text(), want)
	}
	ping := h.Command(0, bin, []string{"-test.run=^$"}, "PTLNETTEST_ROLE=ping", fmt.Sprintf("PTLNETTEST_PEER=%d 77", h.NID(1)))
	b, err := ping.CombinedOutput()
	if err != nil {
		t.Fatalf("ping: %v\n%s", err, b)
	}
	want := fmt.Sprintf("GOT echo:hi payload from %v 1\n", ptlnet.PhysID{NID: h.NID(1), PID: 77})
	if string(b) != want {
		t.Fatalf("ping said %q, want %q", b, want)
	}
}
