// Package examples runs every example program as a real job: 1, 2 and 4
// ranks, on shared memory (smp) and over TCP between two pretend hosts (the
// tcp conduit, loopback sockets), each checking its own answer (a non-zero
// exit fails the test).
package examples

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/launch"
)

// examples are the programs and the arguments that keep them quick on a
// loaded machine, and a line each prints (rank 0) when its check passed.
var examples = []struct {
	name string
	args []string
	ok   string
}{
	{"stencil", []string{"-size", "48", "-iters", "60"}, "matches the serial run"},
	{"dht", []string{"-keys", "2000"}, "absent keys reported absent"},
	{"histogram", []string{"-values", "20000", "-bins", "256"}, "every bin matches the serial count"},
	{"amping", []string{"-laps", "2", "-iters", "200", "-flood", "2000"}, "AM Short round trip"},
	{"portalsring", nil, `rank 0 got "hello from rank`},
}

func TestExamples(t *testing.T) {
	bin := t.TempDir()
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			exe := filepath.Join(bin, ex.name)
			if out, err := exec.Command("go", "build", "-o", exe, "./"+ex.name).CombinedOutput(); err != nil {
				t.Fatalf("go build ./%s: %v\n%s", ex.name, err, out)
			}
			for _, conduit := range []string{"smp", "tcp"} {
				for _, n := range []int{1, 2, 4} {
					t.Run(fmt.Sprintf("%s/n=%d", conduit, n), func(t *testing.T) {
						runExample(t, exe, ex.args, ex.ok, n, conduit)
					})
				}
			}
		})
	}
}

// runExample runs exe as an n-rank job and checks it ended 0 and said ok.
func runExample(t *testing.T, exe string, args []string, ok string, n int, conduit string) {
	cfg := launch.Config{N: n, Program: exe, Args: args, Timeout: 3 * time.Minute}
	if conduit == "tcp" {
		// Two pretend hosts (one for a job of one rank), TCP between them
		// and shared memory inside each, as gexrun --pretend-hosts does.
		cfg.PretendHosts = min(n, 2)
		cfg.Env = []string{"GEX_CONDUIT=tcp", "GEX_TCP_ADDR=127.0.0.1"}
	} else {
		cfg.Env = []string{"GEX_CONDUIT=smp"}
	}
	var out, errOut bytes.Buffer
	cfg.Stdout, cfg.Stderr = &out, &errOut
	code, err := launch.Run(context.Background(), cfg)
	if code != 0 || !strings.Contains(out.String(), ok) {
		t.Fatalf("%d ranks over %s: exit code %d (%v)\nstdout:\n%s\nstderr:\n%s", n, conduit, code, err, out.String(), errOut.String())
	}
	// An example ends normally: no rank is reported as leaving the job.
	if strings.Contains(errOut.String(), "without calling Close") {
		t.Fatalf("%d ranks over %s: a rank was reported leaving the job early:\n%s", n, conduit, errOut.String())
	}
}
