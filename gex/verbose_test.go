package gex_test

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// captureStderr runs fn with os.Stderr redirected and returns what it wrote.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	fn()
	os.Stderr = old
	w.Close()
	return <-done
}

// TestVerboseErrors: gex_System_SetVerboseErrors(1) makes non-fatal errors
// print to the console; 0 silences them; the default follows GEX_VERBOSE.
func TestVerboseErrors(t *testing.T) {
	if inRank() {
		return
	}
	lj, err := gex.NewLoopJob(gex.LoopConfig{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	lj.Run(func(int) {
		c, _, tm, err := lj.ClientInit(0, "VERBOSE", 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		if c.VerboseErrors() != (os.Getenv(gex.EnvVerbose) == "1") {
			t.Errorf("VerboseErrors() = %v with %s=%q", c.VerboseErrors(), gex.EnvVerbose, os.Getenv(gex.EnvVerbose))
		}
		c.SetVerboseErrors(true)
		out := captureStderr(t, func() {
			if err := tm.RequestShort(5, 200, 0); err == nil {
				t.Error("RequestShort to rank 5 of 1 succeeded")
			}
			if _, err := gex.SegmentAttach(tm, 100); err == nil {
				t.Error("SegmentAttach of 100 bytes succeeded")
			}
		})
		if !strings.Contains(out, "rank 5 out of range") || !strings.Contains(out, "size 100 is not a non-zero multiple") {
			t.Errorf("verbose errors not printed; stderr was %q", out)
		}
		c.SetVerboseErrors(false)
		out = captureStderr(t, func() { _ = tm.RequestShort(5, 200, 0) })
		if out != "" {
			t.Errorf("errors printed with verbose errors off: %q", out)
		}
	})
}
