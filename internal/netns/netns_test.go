package netns_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/gexgo/gexgo/internal/netns"
)

// TestSetup: three hosts reach each other over the private network, and a
// host's namespace sees only its own interface and loopback.
func TestSetup(t *testing.T) {
	n, err := netns.Setup(3)
	if errors.Is(err, netns.ErrUnavailable) {
		t.Skipf("multi-host tests need network namespaces: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	for i := range n.Hosts {
		for j, h := range n.Hosts {
			if i == j {
				continue
			}
			args := append(n.Exec(i), "ping", "-c", "1", "-W", "2", h.Addr)
			if _, err := exec.LookPath("ping"); err != nil {
				// No ping: check the route instead.
				args = append(n.Exec(i), "ip", "route", "get", h.Addr)
			}
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("host %d cannot reach host %d (%s): %v\n%s", i, j, h.Addr, err, out)
			}
		}
		out, err := exec.Command("ip", "-n", n.Hosts[i].NS, "-o", "addr").CombinedOutput()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), n.Hosts[i].Addr+"/24") || strings.Count(string(out), " inet ") != 2 {
			t.Fatalf("host %d's addresses:\n%s", i, out)
		}
	}
}
