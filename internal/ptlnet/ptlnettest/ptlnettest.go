// Package ptlnettest starts processes on pretend hosts (network namespaces,
// internal/netns) for Portals tests and benchmarks across "nodes": every
// process gets its host's address as its nid (the namespace's only
// non-loopback interface) and one job secret, so ptlnet connects processes of
// one host through shared memory and processes of different hosts through
// TCP authenticated with the secret. It needs root and iproute2 (errors wrap
// netns.ErrUnavailable where namespaces cannot be made: skip then).
package ptlnettest

import (
	"net/netip"
	"os"
	"os/exec"

	"github.com/gexgo/gexgo/internal/auth"
	"github.com/gexgo/gexgo/internal/netns"
	"github.com/gexgo/gexgo/internal/ptlnet"
)

// Hosts is a set of pretend hosts with one job secret.
type Hosts struct {
	net    *netns.Net
	Secret string // hex, passed to every process as GEX_SECRET
}

// Setup makes k hosts (1..200) and a fresh job secret.
func Setup(k int) (*Hosts, error) {
	s, err := auth.NewSecret()
	if err != nil {
		return nil, err
	}
	n, err := netns.Setup(k)
	if err != nil {
		return nil, err
	}
	return &Hosts{net: n, Secret: auth.EncodeSecret(s)}, nil
}

// Len is the number of hosts.
func (h *Hosts) Len() int { return len(h.net.Hosts) }

// Addr is host i's IPv4 address.
func (h *Hosts) Addr(i int) string { return h.net.Hosts[i].Addr }

// NID is the nid of processes on host i.
func (h *Hosts) NID(i int) uint32 {
	return ptlnet.NIDOf(netip.MustParseAddr(h.net.Hosts[i].Addr))
}

// Command returns a command that runs prog on host i with this process's
// environment plus GEX_SECRET and env ("K=V" entries).
func (h *Hosts) Command(i int, prog string, args []string, env ...string) *exec.Cmd {
	argv := append(h.net.Exec(i), prog)
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	cmd.Env = append(append(os.Environ(), auth.EnvSecret+"="+h.Secret), env...)
	return cmd
}

// Close removes the namespaces (stop the processes first).
func (h *Hosts) Close() error { return h.net.Close() }
