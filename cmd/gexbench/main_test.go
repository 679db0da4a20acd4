package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

// The benchmarks run as real 2-rank jobs (spmdtest re-executes this test
// binary as the ranks), with small counts so that the whole file takes a few
// seconds. The tests check what is printed, never how fast anything was.

// paths are the two RMA paths: rank 1's segment mapped at rank 0 (the
// default on one machine) or not (one rank per neighbourhood).
var paths = []struct {
	name string // as the CSV spells it
	long string // as the table spells it
	env  []string
}{
	{"smp-mapped", "smp mapped", nil},
	{"smp-am", "smp AM", []string{"GASNET_SUPERNODE_MAXSIZE=1"}},
}

// runJob runs gexbench with args as a 2-rank job and returns rank 0's
// standard output. Each rank checks its exit code; rank 1 checks that it
// printed nothing.
func runJob(t *testing.T, env []string, args ...string) string {
	t.Helper()
	return runJobWith(t, []spmdtest.Option{spmdtest.Env(env...)}, args...)
}

// runJobWith is runJob with spmdtest options (pretend hosts, environment).
func runJobWith(t *testing.T, opts []spmdtest.Option, args ...string) string {
	t.Helper()
	var out string
	spmdtest.Run(t, 2, func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		os.Stderr.Write(stderr.Bytes())
		if code != 0 {
			t.Fatalf("gexbench %s: exit code %d; stdout:\n%s", strings.Join(args, " "), code, stdout.String())
		}
		if os.Getenv(boot.EnvRank) != "0" {
			if stdout.Len() != 0 || stderr.Len() != 0 {
				t.Errorf("rank %s printed output; want none:\n%s%s", os.Getenv(boot.EnvRank), stdout.String(), stderr.String())
			}
			return
		}
		// Between markers: the test framework's own lines (=== RUN, PASS)
		// share the rank's output.
		os.Stdout.WriteString(outBegin + "\n" + stdout.String() + outEnd + "\n")
	}, append(opts, spmdtest.Output(&out), spmdtest.Timeout(60*time.Second))...)
	var rank0 strings.Builder
	in := false
	for _, line := range strings.Split(out, "\n") {
		s, ok := strings.CutPrefix(line, "[0] ")
		switch {
		case !ok:
		case s == outBegin:
			in = true
		case s == outEnd:
			in = false
		case in:
			rank0.WriteString(s + "\n")
		}
	}
	return rank0.String()
}

// Markers around gexbench's output in rank 0's standard output.
const (
	outBegin = "--- gexbench output"
	outEnd   = "--- end of gexbench output"
)

// csvRows parses -csv output into "bench,path,size,metric" -> value, checking
// the header, the unit of every row and that no key repeats.
func csvRows(t *testing.T, out string) map[string]float64 {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "# ") { // the header (checked by TestHeader)
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 || lines[0] != csvHeader {
		t.Fatalf("CSV output does not start with %q:\n%s", csvHeader, out)
	}
	rows := map[string]float64{}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 6 {
			t.Errorf("row %q: want 6 fields", l)
			continue
		}
		v, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			t.Errorf("row %q: value: %v", l, err)
			continue
		}
		wantUnit := "us"
		switch {
		case strings.HasPrefix(f[0], "flood-"):
			wantUnit = "MB/s"
		case strings.HasPrefix(f[0], "fadd-flood-"):
			wantUnit = "Mops/s"
		}
		if f[5] != wantUnit {
			t.Errorf("row %q: unit %q, want %q", l, f[5], wantUnit)
		}
		key := strings.Join(f[:4], ",")
		if _, dup := rows[key]; dup {
			t.Errorf("row %q repeats %s", l, key)
		}
		rows[key] = v
	}
	return rows
}

// wantRows checks that rows holds exactly the keys bench,path,size,metric for
// every combination, each with a positive value.
func wantRows(t *testing.T, rows map[string]float64, benches []string, path string, sizes []int, metrics []string) int {
	t.Helper()
	n := 0
	for _, b := range benches {
		for _, s := range sizes {
			for _, m := range metrics {
				key := b + "," + path + "," + strconv.Itoa(s) + "," + m
				v, ok := rows[key]
				switch {
				case !ok:
					t.Errorf("no row %s", key)
				case !(v > 0):
					t.Errorf("row %s = %v, want > 0", key, v)
				}
				n++
			}
		}
	}
	return n
}

func TestLatency(t *testing.T) {
	for _, p := range paths {
		for _, bench := range []string{"put", "get"} {
			t.Run(p.name+"/"+bench, func(t *testing.T) {
				out := runJob(t, p.env, bench, "-iters", "2000", "-batches", "10", "-max", "4096", "-csv")
				if spmdtest.InRank() {
					return
				}
				rows := csvRows(t, out)
				sizes := pow2Sizes(8, 4096)
				n := wantRows(t, rows, []string{bench}, p.name, sizes, []string{"avg", "median", "min"})
				n += wantRows(t, rows, []string{"copy", "move8"}, "local", []int{8}, []string{"avg", "median", "min"})
				if len(rows) != n {
					t.Errorf("%d rows, want %d:\n%s", len(rows), n, out)
				}
				for _, s := range sizes {
					k := bench + "," + p.name + "," + strconv.Itoa(s) + ","
					if rows[k+"min"] > rows[k+"median"] {
						t.Errorf("size %d: min %v > median %v", s, rows[k+"min"], rows[k+"median"])
					}
				}
			})
		}
	}
}

func TestFlood(t *testing.T) {
	sizes := pow2Sizes(8, 64<<10)
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			out := runJob(t, p.env, "flood", "-window", "65536", "-max", "65536", "-reps", "2", "-samples", "2", "-csv")
			if spmdtest.InRank() {
				return
			}
			rows := csvRows(t, out)
			n := wantRows(t, rows, []string{"flood-put", "flood-get"}, p.name, sizes, []string{"median", "best"})
			if len(rows) != n {
				t.Errorf("%d rows, want %d:\n%s", len(rows), n, out)
			}
		})
	}
}

// TestAtomic runs the atomic benchmark on both paths: the CSV has every row
// with a positive value, and the table names the path and reports the
// counter check (the run fails if the counters are wrong).
func TestAtomic(t *testing.T) {
	lat := []string{"avg", "median", "min"}
	for _, p := range paths {
		t.Run(p.name+"/csv", func(t *testing.T) {
			out := runJob(t, p.env, "atomic", "-iters", "2000", "-batches", "10", "-reps", "500", "-samples", "2", "-csv")
			if spmdtest.InRank() {
				return
			}
			rows := csvRows(t, out)
			n := wantRows(t, rows, []string{"fadd-u64"}, p.name, []int{8}, lat)
			n += wantRows(t, rows, []string{"fadd-u32"}, p.name, []int{4}, lat)
			n += wantRows(t, rows, []string{"fadd-flood-u64"}, p.name, []int{8}, []string{"median", "best"})
			n += wantRows(t, rows, []string{"xadd64"}, "local", []int{8}, lat)
			if len(rows) != n {
				t.Errorf("%d rows, want %d:\n%s", len(rows), n, out)
			}
			for _, k := range []string{"fadd-u64," + p.name + ",8,", "fadd-u32," + p.name + ",4,"} {
				if rows[k+"min"] > rows[k+"median"] {
					t.Errorf("%s: min %v > median %v", k, rows[k+"min"], rows[k+"median"])
				}
			}
			if k := "fadd-flood-u64," + p.name + ",8,"; rows[k+"median"] > rows[k+"best"] {
				t.Errorf("%s: median %v > best %v", k, rows[k+"median"], rows[k+"best"])
			}
		})
		t.Run(p.name+"/table", func(t *testing.T) {
			out := runJob(t, p.env, "atomic", "-iters", "1000", "-batches", "5", "-reps", "300", "-samples", "1")
			if spmdtest.InRank() {
				return
			}
			// 1000 U64 FADDs + 100 warm-up, 1000 warm-up + 300 of the flood.
			for _, want := range []string{"GEX_OP_FADD", "path: " + p.long, "U64 FADD latency", "U32 FADD latency", "U64 FADD flood",
				"OpNBI FADD 300 times", "checked: the U64 counter is 2400 and the U32 counter 1100"} {
				if !strings.Contains(out, want) {
					t.Errorf("table lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestTable checks the human-readable output names the path it measured.
func TestTable(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			out := runJob(t, p.env, "put", "-iters", "1000", "-batches", "5", "-max", "4096")
			if spmdtest.InRank() {
				return
			}
			for _, want := range []string{"PutBlocking latency", "path: " + p.long, "8 B", "4 KiB", "copy() of 8 B", "checked:"} {
				if !strings.Contains(out, want) {
					t.Errorf("table lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestOneRank: a job of one rank ends with exit code 2 and says why.
func TestOneRank(t *testing.T) {
	spmdtest.Run(t, 1, func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"put"}, &stdout, &stderr); code != 2 {
			t.Errorf("exit code %d, want 2", code)
		}
		if !strings.Contains(stderr.String(), "needs at least 2 ranks") {
			t.Errorf("stderr %q lacks the reason", stderr.String())
		}
	})
}

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  error
	}{
		{nil, errUsage},
		{[]string{"-help"}, flag.ErrHelp},
		{[]string{"put", "-h"}, flag.ErrHelp},
		{[]string{"ping"}, errUsage},
		{[]string{"put", "extra"}, errUsage},
		{[]string{"flood", "-min", "100", "-max", "10"}, errUsage},
		{[]string{"flood", "-window", "0"}, errUsage},
		{[]string{"put", "-iters", "-1"}, errUsage},
		{[]string{"flood", "-min", "100", "-max", "100000", "-csv"}, nil},
		{[]string{"atomic", "-reps", "100", "-samples", "3", "-csv"}, nil},
		{[]string{"atomic", "-batches", "0"}, errUsage},
	} {
		cfg, err := parseArgs(tc.args, io.Discard)
		if err != tc.err {
			t.Errorf("parseArgs(%q): %v, want %v", tc.args, err, tc.err)
		}
		if err == nil && !cfg.csv {
			t.Errorf("parseArgs(%q): -csv not set", tc.args)
		}
	}
	cfg := config{bench: "flood", minSize: 100, maxSize: 100000, window: 1 << 20}
	if got, want := cfg.floodSizes(), []int{100, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 100000}; !slices.Equal(got, want) {
		t.Errorf("floodSizes(-min 100 -max 100000) = %v, want %v", got, want)
	}
	if got := cfg.segmentSize(); got != 1<<20 {
		t.Errorf("segmentSize = %d, want %d", got, 1<<20)
	}
}

func TestHelpNamesTheAMPath(t *testing.T) {
	var b bytes.Buffer
	if _, err := parseArgs([]string{"-help"}, &b); err != flag.ErrHelp {
		t.Fatal(err)
	}
	for _, want := range []string{"GASNET_SUPERNODE_MAXSIZE=1", "atomic", "FADD", "-iters", "-window", "-reps", "-min", "-max", "-csv"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("-help lacks %q", want)
		}
	}
}

// TestRankProfiles: a -cpuprofile name holding %r makes every rank write
// its own CPU profile of the measurements (the target's side too), each a
// gzipped pprof file.
func TestRankProfiles(t *testing.T) {
	const envDir = "GEXBENCH_TEST_PROFDIR"
	dir := os.Getenv(envDir)
	if dir == "" {
		dir = t.TempDir()
	}
	name := filepath.Join(dir, "prof.%r")
	runJob(t, []string{envDir + "=" + dir}, "put", "-min", "8", "-max", "8", "-iters", "200", "-cpuprofile", name)
	if spmdtest.InRank() {
		return // the launcher checks the files
	}
	for _, r := range []string{"0", "1"} {
		b, err := os.ReadFile(filepath.Join(dir, "prof."+r))
		if err != nil {
			t.Fatalf("rank %s's profile: %v", r, err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("rank %s's profile is not a gzipped pprof file (%d bytes)", r, len(b))
		}
	}
	if _, err := os.Stat(name); err == nil {
		t.Errorf("a file named %q was written: %%r was not replaced", name)
	}
}

// TestTCPLat runs tcplat between two pretend hosts: every round has every
// row (its median, min, paired ratio), the raw stream and both floods, and
// the raw row's ratio to itself is 1.
func TestTCPLat(t *testing.T) {
	out := runJobWith(t, []spmdtest.Option{spmdtest.PretendHosts(2), spmdtest.Env("GEX_CONDUIT=tcp")},
		"tcplat", "-rounds", "2", "-iters", "200", "-batches", "5", "-samples", "1", "-max", "65536", "-csv")
	if spmdtest.InRank() {
		return
	}
	rows := map[string]float64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, ",")
		if len(f) != 6 || strings.HasPrefix(l, "# ") || l == csvHeader {
			continue
		}
		v, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			t.Fatalf("row %q: %v", l, err)
		}
		rows[strings.Join(f[:4], ",")] = v
	}
	for r := 1; r <= 2; r++ {
		pre := "tcplat-r" + strconv.Itoa(r) + "-"
		for _, row := range []struct {
			tag  string
			size int
		}{{"raw-rtt", 8}, {"am-Short", 0}, {"am-Medium8", 8}, {"put8", 8}, {"get8", 8}, {"fadd-u64", 8}, {"barrier", 0}} {
			for _, m := range []string{"avg", "median", "min", "ratio", "ratio-min"} {
				key := pre + row.tag + ",tcp," + strconv.Itoa(row.size) + "," + m
				if v, ok := rows[key]; !ok || !(v > 0) {
					t.Errorf("row %s = %v (present %v), want > 0", key, v, ok)
				}
			}
		}
		if v := rows[pre+"raw-rtt,tcp,8,ratio"]; v != 1 {
			t.Errorf("raw row's ratio to itself = %v, want 1", v)
		}
		for _, key := range []string{pre + "raw-stream,raw,1048576,median", pre + "flood-put,tcp,65536,median", pre + "flood-get,tcp,65536,ratio"} {
			if v, ok := rows[key]; !ok || !(v > 0) {
				t.Errorf("row %s = %v (present %v), want > 0", key, v, ok)
			}
		}
	}
}
