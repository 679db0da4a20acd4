package spmdtest

import (
	"errors"
	"testing"

	"github.com/gexgo/gexgo/internal/launch"
	"github.com/gexgo/gexgo/internal/netns"
)

// Netns makes k hosts of network namespaces for the test (skipping it, with
// the reason, where they cannot be made: no root, no ip) and returns what
// starts a job's ranks on them in blocks (rank r on host r*k/N, with GEX_HOST
// and GEX_TCP_ADDR naming its host), with the bootstrap on a path socket
// (abstract sockets are per namespace). Use it as Launch(Netns(t, k)) or as a
// launch.Config hook. In a rank it returns nil: only the parent launches.
func Netns(t testing.TB, k int) func(*launch.Config) {
	t.Helper()
	if InRank() {
		return nil
	}
	n, err := netns.Setup(k)
	if errors.Is(err, netns.ErrUnavailable) {
		t.Skipf("multi-host tests need network namespaces: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	dir := t.TempDir()
	return func(c *launch.Config) {
		c.SocketDir = dir
		c.Wrap = func(r int) ([]string, []string) {
			h := r * k / c.N
			return n.Exec(h), []string{"GEX_HOST=" + n.Hosts[h].NS, "GEX_TCP_ADDR=" + n.Hosts[h].Addr}
		}
	}
}
