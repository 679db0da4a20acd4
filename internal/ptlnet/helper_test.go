package ptlnet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Helper processes: the test binary re-executed with PTLNET_HELPER set runs
// helperMain instead of the tests. A helper opens a Net, prints "ID nid pid"
// on stdout and then does what its mode says; it exits when stdin closes.
const envHelper = "PTLNET_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

func helperMain(mode string) int {
	var got atomic.Int64
	var n *Net
	h := func(src Peer, hdr, payload []byte) {
		k := got.Add(1)
		if string(hdr) == "end" {
			// The last message of a test: everything before it has arrived (order).
			fmt.Println("GOT", k-1)
		}
		if mode == "echo" && string(hdr) == "end" {
			// The benchmark's last message: answer with the count.
			n.Send(src.ID, []byte("count"), []byte(strconv.FormatInt(k, 10)))
		}
		if mode == "echo" && len(hdr) >= 4 && string(hdr[:4]) == "PING" {
			n.Send(src.ID, hdr, payload)
		}
		if mode == "echo" && string(hdr) == "ping" {
			n.Send(src.ID, hdr, payload)
		}
		if mode == "echo" && string(hdr) == "ack?" {
			n.Send(src.ID, payload[:8], nil) // an acknowledgment from the Handler
		}
	}
	var err error
	n, err = Open(Config{PID: PIDAny, NoTCP: true}, h)
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Println("ID", n.ID().NID, n.ID().PID, n.UID())
	if mode == "send" { // send to the ID in PTLNET_TARGET and report
		var nid, pid uint32
		fmt.Sscan(os.Getenv("PTLNET_TARGET"), &nid, &pid)
		err := n.Send(PhysID{nid, pid}, []byte("hello"), nil)
		fmt.Println("SEND", err == nil, err)
	}
	io.Copy(io.Discard, os.Stdin)
	n.Close()
	return 0
}

// helper is a running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	id    PhysID
	uid   uint32
}

// startHelper starts a helper in mode; extra env and an optional uid to run as.
func startHelper(t *testing.T, mode string, uid int, env ...string) *helper {
	return startHelperTB(t, mode, uid, env...)
}

// startHelperB is startHelper for benchmarks.
func startHelperB(b *testing.B, mode string) *helper { return startHelperTB(b, mode, -1) }

func startHelperTB(t testing.TB, mode string, uid int, env ...string) *helper {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		// The test binary's directory is private: copy it where uid can run it.
		dir, err := os.MkdirTemp("", "ptlnet-helper")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o755)
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "helper")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{envHelper + "=" + mode}, env...)...)
	cmd.Stderr = os.Stderr
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() { h.stdin.Close(); h.cmd.Process.Kill(); h.cmd.Wait() })
	line := h.line(t)
	if _, err := fmt.Sscanf(line, "ID %d %d %d", &h.id.NID, &h.id.PID, &h.uid); err != nil {
		t.Fatalf("helper said %q", line)
	}
	return h
}

func (h *helper) line(t testing.TB) string {
	t.Helper()
	if !h.out.Scan() {
		t.Fatalf("helper ended: %v", h.out.Err())
	}
	return h.out.Text()
}

// count waits for the helper's report of the messages it got before "end".
func (h *helper) count(t *testing.T) int {
	t.Helper()
	for {
		l := h.line(t)
		if strings.HasPrefix(l, "GOT ") {
			k, _ := strconv.Atoi(l[4:])
			return k
		}
	}
}

// TestPeerKilled: a peer killed (SIGKILL) in the middle of a flood makes Send
// fail with ErrUnreachable within the test's deadline, never hang.
func TestPeerKilled(t *testing.T) {
	n := open(t, PIDAny, func(Peer, []byte, []byte) {})
	h := startHelper(t, "sink", -1)
	p := make([]byte, 3000)
	for i := 0; i < 2000; i++ {
		if err := n.Send(h.id, []byte("x"), p); err != nil {
			t.Fatalf("send %d before the kill: %v", i, err)
		}
	}
	h.cmd.Process.Kill()
	h.cmd.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := n.Send(h.id, []byte("x"), p)
		if errors.Is(err, ErrUnreachable) {
			t.Logf("after the kill: %v", err)
			break
		}
		if err != nil {
			t.Fatalf("after the kill: %v, want ErrUnreachable", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("Send to a killed peer still succeeds after 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	// The loss is counted when the progress goroutine reaps the connection, which may come
	// just after a Send has seen the peer gone.
	for st := n.Stats(); st.PeersLost != 1; st = n.Stats() {
		if st.PeersLost > 1 || time.Now().After(deadline) {
			t.Fatalf("stats %+v: want one peer lost", st)
		}
		time.Sleep(time.Millisecond)
	}
	// A process on this node that holds no pid is unreachable at once.
	if err := n.Send(PhysID{NID: n.ID().NID, PID: h.id.PID}, nil, nil); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Send to a pid nobody holds: %v", err)
	}
}

// TestTwoProcesses: messages to a helper process arrive exactly (it counts).
func TestTwoProcesses(t *testing.T) {
	n := open(t, PIDAny, func(Peer, []byte, []byte) {})
	h := startHelper(t, "sink", -1)
	const k = 5000
	for i := 0; i < k; i++ {
		if err := n.Send(h.id, []byte("x"), make([]byte, i%700)); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Send(h.id, []byte("end"), nil); err != nil {
		t.Fatal(err)
	}
	if got := h.count(t); got != k {
		t.Fatalf("helper got %d messages, want %d", got, k)
	}
}

// TestWrongUID: a process of another uid is refused on both sides (as the
// connecting and as the accepting side) unless PTL_SHM_ANY_UID=1; allowed,
// its messages carry its uid.
func TestWrongUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a helper as another uid")
	}
	const nobody = 65534
	var from atomic.Value
	n := open(t, PIDAny, func(src Peer, _, _ []byte) { from.Store(src) })
	h := startHelper(t, "send", nobody, fmt.Sprintf("PTLNET_TARGET=%d %d", n.ID().NID, n.ID().PID))
	if l := h.line(t); !strings.HasPrefix(l, "SEND false") || !strings.Contains(l, "unreachable") {
		t.Errorf("a uid-%d process sending to uid %d: %q, want refused", nobody, os.Getuid(), l)
	}
	if err := n.Send(h.id, nil, nil); !errors.Is(err, ErrUnreachable) {
		t.Errorf("sending to a uid-%d process: %v, want ErrUnreachable", nobody, err)
	}
	waitStat(t, n, "connection from another uid", func(st Stats) bool { return st.Refused >= 1 })

	t.Setenv(EnvAnyUID, "1")
	m := open(t, PIDAny, func(src Peer, _, _ []byte) { from.Store(src) })
	h = startHelper(t, "send", nobody, fmt.Sprintf("PTLNET_TARGET=%d %d", m.ID().NID, m.ID().PID), EnvAnyUID+"=1")
	if l := h.line(t); !strings.HasPrefix(l, "SEND true") {
		t.Fatalf("with %s=1: %q", EnvAnyUID, l)
	}
	deadline := time.Now().Add(30 * time.Second)
	for from.Load() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if src, _ := from.Load().(Peer); src.UID != nobody || src.ID != h.id {
		t.Errorf("message from %+v, want uid %d id %v", src, nobody, h.id)
	}
}
