package main

// -plot FILE.svg draws a run's results (and -compare'd earlier runs' CSV
// files) as lines against the size, log axes, one line per series: gonum's
// plot package, a well-kept plotting library, used here in cmd/gexbench only
// (the library packages keep the standard library and x/sys).

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gexgo/gexgo/internal/version"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// labelled are the rows of one run: this one (label "") or a CSV file (its
// base name).
type labelled struct {
	label string
	rows  []row
}

// readCompare reads the -compare files (comma-separated).
func readCompare(list string) ([]labelled, error) {
	var out []labelled
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		rows, err := readCSV(f)
		if err != nil {
			return nil, err
		}
		out = append(out, labelled{label: strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), rows: rows})
	}
	return out, nil
}

// readCSV reads a file that -csv wrote: "#" lines (the header) are skipped,
// then the line csvHeader, then rows bench,path,size,metric,value,unit.
func readCSV(file string) ([]row, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var rows []row
	sawHeader := false
	sc := bufio.NewScanner(fh)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case line == csvHeader:
			sawHeader = true
			continue
		case !sawHeader:
			return nil, fmt.Errorf("%s:%d: expected the CSV header %q first", file, ln, csvHeader)
		}
		f := strings.Split(line, ",")
		if len(f) != 6 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 6 (%s)", file, ln, len(f), csvHeader)
		}
		size, err1 := strconv.Atoi(f[2])
		v, err2 := strconv.ParseFloat(f[4], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: size %q or value %q is not a number", file, ln, f[2], f[4])
		}
		rows = append(rows, row{bench: f[0], path: f[1], size: size, metric: f[3], value: v, unit: f[5]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !sawHeader {
		return nil, fmt.Errorf("%s: no CSV header %q (write it with gexbench -csv)", file, csvHeader)
	}
	return rows, nil
}

// series is one line of a plot.
type series struct {
	name string
	unit string
	pts  plotter.XYs
}

// plotMetric is the metric a series shows, in order of preference.
var plotMetric = []string{"median", "bw", "value"}

// seriesOf groups rows into lines: one per run, bench and path, with the
// preferred metric, sizes > 0 (log axes), ascending.
func seriesOf(sets []labelled) []series {
	var out []series
	for _, set := range sets {
		type key struct{ bench, path string }
		var order []key
		byKey := map[key][]row{}
		for _, r := range set.rows {
			k := key{r.bench, r.path}
			if _, ok := byKey[k]; !ok {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], r)
		}
		for _, k := range order {
			rows := byKey[k]
			metric := rows[0].metric
			for _, m := range plotMetric {
				if hasMetric(rows, m) {
					metric = m
					break
				}
			}
			s := series{name: k.bench + " " + k.path}
			if set.label != "" {
				s.name = set.label + ": " + s.name
			}
			for _, r := range rows {
				if r.metric == metric && r.size > 0 && r.value > 0 {
					s.unit = r.unit
					s.pts = append(s.pts, plotter.XY{X: float64(r.size), Y: r.value})
				}
			}
			if len(s.pts) == 0 {
				continue
			}
			sort.Slice(s.pts, func(i, j int) bool { return s.pts[i].X < s.pts[j].X })
			out = append(out, s)
		}
	}
	return out
}

func hasMetric(rows []row, m string) bool {
	for _, r := range rows {
		if r.metric == m {
			return true
		}
	}
	return false
}

// axisLabel names the y axis of a unit.
func axisLabel(unit string) string {
	switch unit {
	case "us":
		return "latency (us)"
	case "MB/s":
		return "bandwidth (MB/s, 10^6 B/s)"
	case "Mops/s":
		return "rate (M operations/s)"
	}
	return unit
}

// writePlots draws the series of sets into file, one plot per unit: the
// first unit's plot is file itself, the others file with "-<unit>" before
// the extension. It returns the files written.
func writePlots(file, title string, sets []labelled) ([]string, error) {
	all := seriesOf(sets)
	if len(all) == 0 {
		return nil, fmt.Errorf("-plot %s: no rows with a size to plot", file)
	}
	var units []string
	byUnit := map[string][]series{}
	for _, s := range all {
		if _, ok := byUnit[s.unit]; !ok {
			units = append(units, s.unit)
		}
		byUnit[s.unit] = append(byUnit[s.unit], s)
	}
	var files []string
	for i, u := range units {
		name := file
		if i > 0 {
			ext := filepath.Ext(file)
			name = strings.TrimSuffix(file, ext) + "-" + unitSlug(u) + ext
		}
		if err := drawPlot(name, title, u, byUnit[u]); err != nil {
			return nil, err
		}
		files = append(files, name)
	}
	return files, nil
}

func unitSlug(u string) string {
	return strings.NewReplacer("/", "p", " ", "").Replace(u)
}

// drawPlot draws one plot of series of one unit, log-log.
func drawPlot(file, title, unit string, ss []series) error {
	p := plot.New()
	p.Title.Text = "gexbench " + title
	p.X.Label.Text = "size (bytes)"
	p.Y.Label.Text = axisLabel(unit)
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	var args []any
	for _, s := range ss {
		args = append(args, s.name, s.pts)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return fmt.Errorf("-plot %s: %v", file, err)
	}
	if err := p.Save(9*vg.Inch, 6*vg.Inch, file); err != nil {
		return fmt.Errorf("-plot %s: %v", file, err)
	}
	return nil
}

// addPlotFlags defines -plot and -compare.
func addPlotFlags(fs *flag.FlagSet, cfg *config) {
	fs.StringVar(&cfg.plot, "plot", "", "rank 0 also draws the results into this file (.svg, .png or .pdf): against the size, log axes, one line per series")
	fs.StringVar(&cfg.compare, "compare", "", "with -plot: also draw these earlier -csv outputs (comma-separated files), one line per series of each")
}

// checkPlot validates -plot and -compare.
func (cfg *config) checkPlot() error {
	if cfg.compare != "" && cfg.plot == "" {
		return errors.New("-compare needs -plot FILE.svg")
	}
	if cfg.plot != "" {
		switch strings.ToLower(filepath.Ext(cfg.plot)) {
		case ".svg", ".png", ".pdf", ".eps":
		default:
			return fmt.Errorf("-plot %s: the name must end in .svg, .png, .pdf or .eps", cfg.plot)
		}
	}
	return nil
}

// offline handles the command lines that need no job: --version, and
// "-compare A.csv,B.csv -plot FILE.svg" without a benchmark name (plots
// earlier runs). done is false for everything else.
func offline(args []string, stdout, stderr io.Writer) (code int, done bool) {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return 0, false
	}
	switch args[0] {
	case "-version", "--version":
		fmt.Fprintln(stdout, version.String("gexbench"))
		return 0, true
	case "-h", "-help", "--help":
		return 0, false
	}
	var cfg config
	fs := flag.NewFlagSet("gexbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addPlotFlags(fs, &cfg)
	title := fs.String("title", "", "plot title (default: the files' names)")
	if err := fs.Parse(args); err != nil {
		return 2, true
	}
	if cfg.compare == "" || cfg.plot == "" || fs.NArg() != 0 {
		fmt.Fprintf(stderr, "gexbench: without a benchmark name: gexbench -compare A.csv[,B.csv...] -plot FILE.svg [-title T]\n%s\n", synopsis)
		return 2, true
	}
	if err := cfg.checkPlot(); err != nil {
		fmt.Fprintf(stderr, "gexbench: %v\n", err)
		return 2, true
	}
	sets, err := readCompare(cfg.compare)
	if err != nil {
		fmt.Fprintf(stderr, "gexbench: -compare: %v\n", err)
		return 1, true
	}
	if *title == "" {
		*title = strings.ReplaceAll(cfg.compare, ",", " vs ")
	}
	files, err := writePlots(cfg.plot, *title, sets)
	if err != nil {
		fmt.Fprintf(stderr, "gexbench: %v\n", err)
		return 1, true
	}
	fmt.Fprintf(stdout, "gexbench: wrote %s\n", strings.Join(files, ", "))
	return 0, true
}
