package main

// Size sweeps, units, paths and the header, as HPC users read benchmark
// output (the OSU micro-benchmarks' conventions): every benchmark with a
// size sweeps the powers of two from -min to -max; latency is in
// microseconds and bandwidth in MB/s (10^6 B/s), one unit per column; the
// header names the version, the conduit and path, the ranks and the hosts.

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/version"
)

// pow2Sizes are the powers of two in [lo, hi], with lo and hi themselves
// when they are not powers of two (so -min 100 -max 100000 measures 100,
// 128, ..., 65536, 100000).
func pow2Sizes(lo, hi int) []int {
	if lo < 1 || hi < lo {
		return nil
	}
	var out []int
	if lo&(lo-1) != 0 {
		out = append(out, lo)
	}
	for s := 1; s <= hi && s > 0; s <<= 1 {
		if s >= lo {
			out = append(out, s)
		}
	}
	if hi&(hi-1) != 0 && hi != lo {
		out = append(out, hi)
	}
	return out
}

// sizes is the sweep of -min..-max.
func (cfg *config) sizes() []int { return pow2Sizes(cfg.minSize, cfg.maxSize) }

// sizeIters is the number of latency operations for size: -iters up to
// 8 KiB, then fewer in proportion to the size (at least 100), as the OSU
// latency tests lower their counts for large messages.
func (cfg *config) sizeIters(size int) int {
	if size <= 8<<10 {
		return cfg.iters
	}
	return max(100, int(int64(cfg.iters)*(8<<10)/int64(size)))
}

// maxCollSize bounds the collective sweeps (gexbench's segment and the
// collectives' staging, not the API, set it).
const maxCollSize = 4 << 20

// collSizes is the broadcast sweep.
func (cfg *config) collSizes() []int { return pow2Sizes(cfg.minSize, min(cfg.maxSize, maxCollSize)) }

// reduceSizes is the reduction sweep: whole U64 elements.
func (cfg *config) reduceSizes() []int {
	var out []int
	for _, s := range pow2Sizes(max(8, cfg.minSize), min(max(8, cfg.maxSize), maxCollSize)) {
		if s%8 == 0 {
			out = append(out, s)
		} else if r := s / 8 * 8; r > 0 && (len(out) == 0 || out[len(out)-1] != r) {
			out = append(out, r)
		}
	}
	return out
}

// visChunks is the VIS sweep of chunk sizes: at most half the payload, so
// every operation has at least two chunks.
func (cfg *config) visChunks() []int { return pow2Sizes(cfg.minSize, min(cfg.maxSize, visPayload/2)) }

// pathNames names an RMA path for the table and the CSV: "smp mapped" (rank
// 1's segment is mapped here: a copy), "smp AM" (AMs through shared memory)
// or "tcp" (AMs over TCP to another host).
func pathNames(mapped, otherHost bool) (long, short string) {
	switch {
	case mapped:
		return "smp mapped (rank 1's segment is mapped here: an RMA is a copy, an atomic a CPU atomic)", "smp-mapped"
	case otherHost:
		return "tcp (AM protocol over TCP to rank 1's host)", "tcp"
	}
	return "smp AM (AM protocol through shared memory)", "smp-am"
}

// onOtherHost reports whether job rank r is on another host than this rank.
func onOtherHost(c *gex.Client, r gex.Rank) bool {
	info, _ := c.QueryHostInfo()
	for _, ri := range info {
		if ri.JobRank == r {
			return false
		}
	}
	return true
}

// conduitName is the conduit the ranks use (GEX_CONDUIT, smp by default).
func conduitName() string {
	if c := os.Getenv("GEX_CONDUIT"); c != "" {
		return c
	}
	return "smp"
}

// header is the lines before every result, each starting with "# " (so a
// CSV reader can skip them as comments).
func (cfg *config) header(c *gex.Client, tm *gex.TM, path string) string {
	hosts := c.QueryMyPosition().HostSetSize
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", version.String("gexbench"))
	fmt.Fprintf(&b, "# %s: conduit %s, path %s; %s on %s\n", cfg.bench, conduitName(), path,
		plural(int(tm.QuerySize()), "rank"), plural(int(hosts), "host"))
	fmt.Fprintf(&b, "# units: latency in us (microseconds), bandwidth in MB/s (10^6 bytes/s), rates in Mops/s\n")
	return b.String()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// output prints the header and the results (table or CSV) and writes the
// -plot file.
func (cfg *config) output(res *results, c *gex.Client, tm *gex.TM, path string, stdout io.Writer) error {
	io.WriteString(stdout, cfg.header(c, tm, path))
	if cfg.csv {
		res.writeCSV(stdout)
	} else {
		res.writeTable(stdout)
	}
	if cfg.plot == "" {
		return nil
	}
	series := []labelled{{label: "", rows: res.rows}}
	more, err := readCompare(cfg.compare)
	if err != nil {
		return err
	}
	files, err := writePlots(cfg.plot, cfg.bench+" ("+conduitName()+", "+plural(int(tm.QuerySize()), "rank")+")", append(series, more...))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "# plot: %s\n", strings.Join(files, ", "))
	return nil
}
