package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gexgo/gexgo/internal/launch"
	"github.com/gexgo/gexgo/internal/netns"
)

// netnsFlag registers --netns K: run the job across K hosts made of network
// namespaces on this machine (internal/netns: one namespace per host with
// its own loopback and an address on a private bridge), so that the tcp
// conduit is measured and tested over real links between hosts rather than
// between pretend hosts on one loopback. It needs root and iproute2.
func netnsFlag(fs *flag.FlagSet) *int {
	return fs.Int("netns", 0, "run the ranks on K hosts made of network namespaces (root; tcp conduit)")
}

// netnsUsage is the --netns line of the usage text.
const netnsUsage = `  --netns K           split the ranks into K consecutive blocks, each on its own network
                      namespace ("host") joined to the others by veth links to a private
                      bridge; the ranks get GEX_HOST, GEX_TCP_ADDR and GEX_CONDUIT=tcp (unless
                      GEX_CONDUIT is set). Needs root and the ip command (iproute2); the
                      namespaces are removed when the job ends
`

// runNetns runs the job described by cfg, on k namespace hosts when k > 0.
func runNetns(ctx context.Context, k int, cfg launch.Config, stderr io.Writer) (int, error) {
	if k == 0 {
		return launch.Run(ctx, cfg)
	}
	if k < 0 || k > cfg.N {
		fmt.Fprintf(stderr, "gexrun: --netns %d is out of range [0, -n = %d]\n%s\n", k, cfg.N, synopsis)
		return launch.CodeUsage, nil
	}
	if cfg.PretendHosts > 0 || len(cfg.Hosts) > 0 {
		fmt.Fprintf(stderr, "gexrun: --netns excludes --pretend-hosts and --hosts\n%s\n", synopsis)
		return launch.CodeUsage, nil
	}
	n, err := netns.Setup(k)
	if err != nil {
		fmt.Fprintf(stderr, "gexrun: --netns %d: %v\n", k, err)
		return 1, err
	}
	defer n.Close()
	dir, err := os.MkdirTemp("", "gexrun-netns-")
	if err != nil {
		fmt.Fprintf(stderr, "gexrun: --netns: %v\n", err)
		return 1, err
	}
	defer os.RemoveAll(dir)
	conduitEnv := []string{}
	if os.Getenv("GEX_CONDUIT") == "" {
		conduitEnv = append(conduitEnv, "GEX_CONDUIT=tcp")
	}
	cfg.SocketDir = dir // abstract sockets are per namespace: the bootstrap uses a path
	cfg.Wrap = func(r int) ([]string, []string) {
		h := r * k / cfg.N
		env := append([]string{"GEX_HOST=" + n.Hosts[h].NS, "GEX_TCP_ADDR=" + n.Hosts[h].Addr}, conduitEnv...)
		return n.Exec(h), env
	}
	return launch.Run(ctx, cfg)
}
