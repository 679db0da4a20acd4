package main

import (
	"io"
	"testing"

	"github.com/gexgo/gexgo/internal/spmdtest"
)

// TestGASNet1API: -api gasnet1 prints, for each case, the EX figure and the
// GASNet-1 figure of the same run, on both paths.
func TestGASNet1API(t *testing.T) {
	for _, p := range paths {
		for _, tc := range []struct {
			bench string
			sizes []int
		}{{"put", pow2Sizes(8, 64)}, {"get", pow2Sizes(8, 64)}, {"am", []int{0}}, {"barrier", []int{0}}} {
			t.Run(p.name+"/"+tc.bench, func(t *testing.T) {
				out := runJob(t, p.env, tc.bench, "-api", "gasnet1", "-iters", "400", "-batches", "4", "-max", "64", "-csv")
				if spmdtest.InRank() {
					return
				}
				rows := csvRows(t, out)
				n := wantRows(t, rows, []string{tc.bench}, "ex", tc.sizes, []string{"median"})
				n += wantRows(t, rows, []string{tc.bench}, "gasnet1", tc.sizes, []string{"median"})
				if len(rows) != n {
					t.Errorf("%d rows, want %d:\n%s", len(rows), n, out)
				}
			})
		}
	}
}

func TestGASNet1APIArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  error
	}{
		{[]string{"put", "-api", "gasnet1"}, nil},
		{[]string{"barrier", "-api", "gasnet1"}, nil},
		{[]string{"flood", "-api", "gasnet1"}, errUsage},
		{[]string{"put", "-api", "mpi"}, errUsage},
	} {
		if _, err := parseArgs(tc.args, io.Discard); err != tc.err {
			t.Errorf("parseArgs(%q): %v, want %v", tc.args, err, tc.err)
		}
	}
}
