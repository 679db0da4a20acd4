package launch_test

import (
	"bytes"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/auth"
	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/launch"
)

// TestSSHSpawner: ranks started through a remote shell (testdata/fakessh
// stands in for ssh and runs the command here) on two hosts in blocks join
// the job over the TCP bootstrap, proving the job secret, and gather.
func TestSSHSpawner(t *testing.T) {
	fake, err := filepath.Abs("testdata/fakessh")
	if err != nil {
		t.Fatal(err)
	}
	cfg := launch.Config{N: 4, Hosts: []string{"hostA", "hostB"}, SSH: []string{fake}, BootAddr: "127.0.0.1"}
	res := runJob(t, cfg, "gather")
	if res.code != 0 {
		t.Fatalf("job exited with %d:\n%s", res.code, res.out)
	}
	for r := 0; r < 4; r++ {
		if !strings.Contains(res.out, "rank "+string(rune('0'+r))+" gathered ok") {
			t.Fatalf("rank %d did not gather:\n%s", r, res.out)
		}
	}
	res = runJob(t, cfg, "env")
	for r, want := range []string{"hostA", "hostA", "hostB", "hostB"} {
		line := "rank " + string(rune('0'+r)) + ": " + boot.EnvHost + "=" + want
		if !strings.Contains(res.out, line) {
			t.Fatalf("want %q in the output:\n%s", line, res.out)
		}
	}
	if !strings.Contains(res.out, boot.EnvBoot+"=tcp:127.0.0.1:") {
		t.Fatalf("ranks did not get a TCP bootstrap address:\n%s", res.out)
	}
}

// TestTCPBootstrapRefusesStranger: a connection to the TCP bootstrap that
// does not prove the job secret is dropped before its HELLO is read.
func TestTCPBootstrapRefusesStranger(t *testing.T) {
	secret := bytes.Repeat([]byte{1}, auth.SecretLen)
	srv, err := launch.ListenTCP("127.0.0.1:0", 2, secret, "job1")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := strings.TrimPrefix(srv.Addr(), "tcp:")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = auth.Handshake(c, &auth.Params{Secret: bytes.Repeat([]byte{2}, auth.SecretLen), JobID: "job1", Rank: 0, Size: 3, Timeout: 2 * time.Second}, true, 2)
	var ae *auth.AuthError
	if !errors.As(err, &ae) {
		t.Fatalf("handshake with the wrong secret: %v, want an authentication error", err)
	}
	select {
	case ev := <-srv.Events():
		if ev.Kind != launch.EventDropped || !strings.Contains(ev.Msg, "handshake") {
			t.Fatalf("server event %+v, want a dropped connection naming the handshake", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not report the refused connection")
	}
	if _, err := launch.ListenTCP("0.0.0.0:0", 2, secret, "job1"); err == nil {
		t.Fatal("ListenTCP on every interface succeeded")
	}
}

// TestSSHSessionLost: when a rank's ssh session dies, the job ends naming
// that rank, and nothing of the job is left (runJob checks), the orphaned
// rank included: on a real remote host its bootstrap connection closes
// ("launcher connection lost; exiting").
func TestSSHSessionLost(t *testing.T) {
	fake, err := filepath.Abs("testdata/fakessh-child")
	if err != nil {
		t.Fatal(err)
	}
	cfg := launch.Config{N: 4, Hosts: []string{"hostA", "hostB"}, SSH: []string{fake}, BootAddr: "127.0.0.1", Timeout: 20 * time.Second}
	res := runJob(t, cfg, "sshlost", "2")
	if res.code == 0 || res.code == launch.CodeTimeout {
		t.Fatalf("job exited with %d, want a failure before the timeout:\n%s", res.code, res.out)
	}
	if !strings.Contains(res.out, "rank 2 (pid") {
		t.Fatalf("the job's end does not name rank 2:\n%s", res.out)
	}
}
