package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/launch"
)

// TestLegacy runs the example as a real 3-node job (the launcher builds it)
// on the mapped path and on the AM path, and checks that every node's checks
// passed (the job exits 0 only then) and node 0 printed its summary.
func TestLegacy(t *testing.T) {
	if os.Getenv("GEX_TEST_CONDUIT") == "loop" {
		t.Skip("GEX_TEST_CONDUIT=loop: the example runs as processes")
	}
	for _, env := range [][]string{nil, {"GASNET_SUPERNODE_MAXSIZE=1"}} {
		var out bytes.Buffer
		code, err := launch.Run(context.Background(), launch.Config{
			N: 3, Program: "github.com/gexgo/gexgo/examples/legacy", Args: []string{"-laps", "8"},
			Env: env, Timeout: 120 * time.Second, Stdout: &out, Stderr: &out,
		})
		if err != nil || code != 0 {
			t.Fatalf("env %v: code %d, err %v\n%s", env, code, err, out.String())
		}
		if !strings.Contains(out.String(), "legacy: 3 nodes: ring of 8 laps") {
			t.Fatalf("env %v: no summary:\n%s", env, out.String())
		}
	}
}
