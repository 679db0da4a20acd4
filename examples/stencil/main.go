// Command stencil solves the 2-D Laplace equation by Jacobi iteration on a
// grid split over a process grid, the way a halo-exchange code in MPI or
// OpenSHMEM would, and checks its answer against a serial run of the same
// iteration. Run it with the launcher:
//
//	go run ./cmd/gexrun -n 4 ./examples/stencil -size 256 -iters 500
//
// What it shows:
//   - the segment as typed memory: gex.View[float64](seg) is the rank's block
//     of the grid, with a one-cell halo, in two buffers (old and new);
//   - halo exchange by strided VIS puts (StridedPutNBI): a boundary row is
//     one contiguous run, a boundary column a run of elements a row apart;
//     both land directly in the neighbour's halo, at the address
//     tm.RemoteAddr gives for the neighbour's segment;
//   - NBIWait to complete the puts, then one barrier per iteration
//     (tm.Barrier) so nobody reads a halo before it was written, nor
//     overwrites one still being read;
//   - the residual by a typed reduction (gex.ReduceToAll over float64).
//
// The grid is size x size interior points with a fixed boundary: 1 along the
// top edge, 0 elsewhere. Ranks form a px x py grid (px*py = N, as square as
// N allows); size must be divisible by both. Every rank also runs the serial
// iteration on the whole grid and compares its block bit for bit (the update
// is the same arithmetic in the same order), and the residual within 1e-9;
// any difference exits non-zero.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"

	"github.com/gexgo/gexgo/gex"
)

func main() {
	size := flag.Int("size", 64, "interior points per side of the global grid")
	iters := flag.Int("iters", 100, "Jacobi iterations")
	flag.Parse()

	c, _, tm, err := gex.ClientInit("STENCIL", 0)
	check(err, "ClientInit")
	me, n := int(tm.QueryRank()), int(tm.QuerySize())
	px, py := procGrid(n)
	if *size <= 0 || *size%px != 0 || *size%py != 0 {
		fail("-size %d must be positive and divisible by the process grid %dx%d", *size, px, py)
	}
	pi, pj := me/py, me%py       // this rank's place in the process grid
	nx, ny := *size/px, *size/py // interior block of this rank
	w := ny + 2                  // row length with the halo
	cells := (nx + 2) * w        // one buffer

	// Two buffers of (nx+2) x (ny+2) float64 in the segment, page-rounded.
	segSize := uint64(2*cells*8+gex.PageSize-1) / gex.PageSize * gex.PageSize
	seg, err := gex.SegmentAttach(tm, segSize)
	check(err, "SegmentAttach")
	grid := gex.View[float64](seg)
	buf := [2][]float64{grid[:cells], grid[cells : 2*cells]}

	// The fixed boundary: the top edge of the global grid is 1.
	if pi == 0 {
		for j := 0; j < w; j++ {
			buf[0][j], buf[1][j] = 1, 1
		}
	}

	// Neighbours: up, down, left, right (-1 at the global boundary).
	nbr := func(di, dj int) int {
		i, j := pi+di, pj+dj
		if i < 0 || i >= px || j < 0 || j >= py {
			return -1
		}
		return i*py + j
	}
	up, down, left, right := nbr(-1, 0), nbr(1, 0), nbr(0, -1), nbr(0, 1)

	// A halo put: count elements from (si, sj) of my buffer b to (di, dj) of
	// the neighbour's, stride elements apart on both sides (1 for a row, w
	// for a column).
	put := func(peer, b, si, sj, di, dj, count, stride int) {
		bufOff := b * cells * 8
		dst, err := tm.RemoteAddr(gex.Rank(peer), uintptr(bufOff+(di*w+dj)*8))
		check(err, "RemoteAddr")
		strides := []int{stride * 8}
		err = tm.StridedPutNBI(gex.Rank(peer), dst, strides, seg.Bytes(), bufOff+(si*w+sj)*8, strides, 8, []int{count}, 0)
		check(err, "StridedPutNBI")
	}
	exchange := func(b int) {
		if up >= 0 {
			put(up, b, 1, 1, nx+1, 1, ny, 1) // my first row -> its bottom halo
		}
		if down >= 0 {
			put(down, b, nx, 1, 0, 1, ny, 1) // my last row -> its top halo
		}
		if left >= 0 {
			put(left, b, 1, 1, 1, ny+1, nx, w) // my first column -> its right halo
		}
		if right >= 0 {
			put(right, b, 1, ny, 1, 0, nx, w) // my last column -> its left halo
		}
		check(c.NBIWait(gex.ECPut, 0), "NBIWait")
		check(tm.Barrier(), "Barrier")
	}

	exchange(0)
	var local float64
	for it := 0; it < *iters; it++ {
		local = jacobi(buf[it%2], buf[(it+1)%2], nx, ny, w)
		exchange((it + 1) % 2)
	}
	res := []float64{local}
	check(gex.ReduceToAll(tm, res, res, gex.OPAdd), "ReduceToAll")
	residual := math.Sqrt(res[0])

	// The same iteration on the whole grid, serially.
	want, wantRes := serial(*size, *iters)
	final := buf[*iters%2]
	for i := 1; i <= nx; i++ {
		for j := 1; j <= ny; j++ {
			gi, gj := pi*nx+i, pj*ny+j
			if got, exp := final[i*w+j], want[gi*(*size+2)+gj]; got != exp {
				fail("rank %d: u[%d][%d] = %v, the serial run has %v", me, gi, gj, got, exp)
			}
		}
	}
	if math.Abs(residual-wantRes) > 1e-9*math.Max(1, wantRes) {
		fail("rank %d: residual %v, the serial run has %v", me, residual, wantRes)
	}
	if me == 0 {
		fmt.Printf("stencil: %dx%d grid on %dx%d ranks, %d iterations: residual %.6e, matches the serial run\n", *size, *size, px, py, *iters, residual)
	}
	// The normal end: a final barrier (nobody leaves while a peer may still
	// need it), then Close, which also sends what is still batched.
	check(tm.Barrier(), "Barrier")
	check(c.Close(), "Close")
}

// procGrid factors n into px*py with px <= py, as square as possible.
func procGrid(n int) (px, py int) {
	px = int(math.Sqrt(float64(n)))
	for n%px != 0 {
		px--
	}
	return px, n / px
}

// serial runs the Jacobi iteration on the whole (size+2)^2 grid and returns
// it and the residual of the last iteration.
func serial(size, iters int) ([]float64, float64) {
	w := size + 2
	a, b := make([]float64, w*w), make([]float64, w*w)
	for j := 0; j < w; j++ {
		a[j], b[j] = 1, 1
	}
	var res float64
	for it := 0; it < iters; it++ {
		res = jacobi(a, b, size, size, w)
		a, b = b, a
	}
	return a, math.Sqrt(res)
}

// jacobi is one Jacobi sweep over the nx x ny interior of cur (rows of w
// values, a one-cell halo around the interior) into next, and returns the
// sum of the squared changes. The distributed run and the serial reference
// share it, so their results agree bit for bit where the halos are right.
func jacobi(cur, next []float64, nx, ny, w int) float64 {
	var sum float64
	for i := 1; i <= nx; i++ {
		for j := 1; j <= ny; j++ {
			v := 0.25 * (cur[(i-1)*w+j] + cur[(i+1)*w+j] + cur[i*w+j-1] + cur[i*w+j+1])
			d := v - cur[i*w+j]
			sum += d * d
			next[i*w+j] = v
		}
	}
	return sum
}

func check(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "stencil: "+format+"\n", args...)
	os.Exit(1)
}
