package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gexgo/gexgo/internal/spmdtest"
)

func TestPow2Sizes(t *testing.T) {
	for _, tc := range []struct {
		lo, hi int
		want   []int
	}{
		{8, 64, []int{8, 16, 32, 64}},
		{1, 4, []int{1, 2, 4}},
		{100, 1000, []int{100, 128, 256, 512, 1000}},
		{8, 8, []int{8}},
		{100, 100, []int{100}},
		{9, 15, []int{9, 15}},
		{10, 5, nil},
	} {
		if got := pow2Sizes(tc.lo, tc.hi); !slices.Equal(got, tc.want) {
			t.Errorf("pow2Sizes(%d, %d) = %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
	cfg := config{minSize: 4, maxSize: 100}
	if got, want := cfg.reduceSizes(), []int{8, 16, 32, 64, 96}; !slices.Equal(got, want) {
		t.Errorf("reduceSizes(-min 4 -max 100) = %v, want %v (whole U64 elements)", got, want)
	}
	cfg = config{iters: 1000}
	if cfg.sizeIters(8192) != 1000 || cfg.sizeIters(16384) != 500 || cfg.sizeIters(4<<20) != 100 {
		t.Errorf("sizeIters: %d %d %d, want 1000 500 100", cfg.sizeIters(8192), cfg.sizeIters(16384), cfg.sizeIters(4<<20))
	}
}

// svgTexts are the text elements of an SVG file.
func svgTexts(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`<text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestPlotFromCSV renders the fixtures (as -compare does) and checks the
// plots: one file per unit, a legend entry per series, log-scale ticks, the
// axis labels.
func TestPlotFromCSV(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cmp.svg")
	var stdout, stderr bytes.Buffer
	code := run([]string{"-compare", "testdata/put-smp.csv,testdata/flood-tcp.csv", "-plot", out, "-title", "fixture"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("gexbench -compare: code %d, stderr %q", code, stderr.String())
	}
	mbs := filepath.Join(filepath.Dir(out), "cmp-MBps.svg")
	if want := "gexbench: wrote " + out + ", " + mbs + "\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	// The latency plot: the first unit met (us).
	texts := svgTexts(t, out)
	for _, want := range []string{"gexbench fixture", "size (bytes)", "latency (us)",
		"put-smp: put smp-mapped", "put-smp: copy local", "flood-tcp: put tcp", "10", "100", "1000"} {
		if !slices.Contains(texts, want) {
			t.Errorf("%s lacks the text %q; has %q", out, want, texts)
		}
	}
	for _, bad := range []string{"flood-tcp: flood-put tcp", "put-smp: put smp-mapped avg"} {
		if slices.Contains(texts, bad) {
			t.Errorf("%s has %q, which belongs elsewhere or is not a series", out, bad)
		}
	}
	// The bandwidth plot: flood-put and flood-get, medians.
	texts = svgTexts(t, mbs)
	for _, want := range []string{"bandwidth (MB/s, 10^6 B/s)", "flood-tcp: flood-put tcp", "flood-tcp: flood-get tcp"} {
		if !slices.Contains(texts, want) {
			t.Errorf("%s lacks the text %q; has %q", mbs, want, texts)
		}
	}
	if slices.Contains(texts, "put-smp: put smp-mapped") {
		t.Errorf("%s has a latency series", mbs)
	}
	// One drawn line per series with more than one point: 3 sizes of put
	// smp-mapped and 2 of put tcp; the single-point reference is a glyph.
	b, _ := os.ReadFile(out)
	if got := strings.Count(string(b), "<path"); got < 3 {
		t.Errorf("%s has %d paths, want the axes' and a line per series", out, got)
	}
}

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("size,value\n8,1\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-compare", bad, "-plot", filepath.Join(dir, "x.svg")}, 1, "expected the CSV header"},
		{[]string{"-compare", filepath.Join(dir, "missing.csv"), "-plot", filepath.Join(dir, "x.svg")}, 1, "no such file"},
		{[]string{"-compare", "testdata/put-smp.csv", "-plot", filepath.Join(dir, "x.txt")}, 2, "must end in .svg"},
		{[]string{"-compare", "testdata/put-smp.csv"}, 2, "-compare A.csv[,B.csv...] -plot FILE.svg"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("gexbench %q: code %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
	if _, err := parseArgs([]string{"put", "-compare", "a.csv"}, &bytes.Buffer{}); err != errUsage {
		t.Errorf("put -compare without -plot: %v, want a usage error", err)
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, &stdout, &stderr); code != 0 || !regexp.MustCompile(`^gexbench gexgo v\S+ .*\(go1\.`).MatchString(stdout.String()) {
		t.Errorf("gexbench --version: code %d, stdout %q", code, stdout.String())
	}
}

// TestHeader: every output starts with the version, the benchmark, the
// conduit and path, the ranks and hosts, and the units.
func TestHeader(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			out := runJob(t, p.env, "get", "-iters", "200", "-batches", "2", "-max", "64")
			if spmdtest.InRank() {
				return
			}
			lines := strings.SplitN(out, "\n", 4)
			if len(lines) < 4 || !strings.HasPrefix(lines[0], "# gexbench gexgo v") ||
				!strings.HasPrefix(lines[1], "# get: conduit smp, path "+p.long) || !strings.HasSuffix(lines[1], "; 2 ranks on 1 host") ||
				lines[2] != "# units: latency in us (microseconds), bandwidth in MB/s (10^6 bytes/s), rates in Mops/s" {
				t.Errorf("header:\n%s", strings.Join(lines[:min(3, len(lines))], "\n"))
			}
			if !strings.Contains(out, "avg (us)") {
				t.Errorf("the table's columns do not name their unit:\n%s", out)
			}
		})
	}
}
