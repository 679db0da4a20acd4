package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/gexgo/gexgo/internal/spmdtest"
	"golang.org/x/sys/unix"
)

// TestFloors: `gexbench floor`, `am` and `barrier` print the shared-memory
// floors of the same run (rows floor-pingpong, floor-twoline,
// floor-oneline, floor-ringflood, floor-flagbarrier, floor-copyecho of 4 KiB and 64 KiB, and floor-switch
// where ranks may pin to CPU 0; path shm, avg/median/min in us; and
// floor-copy of 64 KiB and 1 MiB, path local) when
// rank 1's segment is mapped into rank 0, and print no floor rows when it is
// not; the table of `gexbench floor` names the floors, or says why there are
// none.
func TestFloors(t *testing.T) {
	lat := []string{"avg", "median", "min"}
	for _, p := range paths {
		for _, bench := range []string{"floor", "am", "barrier"} {
			t.Run(p.name+"/"+bench, func(t *testing.T) {
				out := runJob(t, p.env, bench, "-csv", "-iters", "2000", "-batches", "10", "-max", "64")
				if spmdtest.InRank() {
					return
				}
				rows := csvRows(t, out)
				var floors []string
				for k := range rows {
					if strings.HasPrefix(k, "floor-") {
						floors = append(floors, k)
					}
				}
				if p.name == "smp-am" {
					if len(floors) != 0 {
						t.Errorf("%s without a mapped segment printed floor rows %v", bench, floors)
					}
					return
				}
				n := wantRows(t, rows, []string{"floor-pingpong"}, "shm", []int{8}, lat)
				n += wantRows(t, rows, []string{"floor-twoline"}, "shm", []int{8}, lat)
				n += wantRows(t, rows, []string{"floor-oneline"}, "shm", []int{8}, lat)
				n += wantRows(t, rows, []string{"floor-ringflood"}, "shm", []int{8}, lat)
				n += wantRows(t, rows, []string{"floor-flagbarrier"}, "shm", []int{0}, lat)
				n += wantRows(t, rows, []string{"floor-copyecho"}, "shm", []int{4096, 65536}, lat)
				n += wantRows(t, rows, []string{"floor-copy"}, "local", []int{65536, 1 << 20}, lat)
				if canPinCPU0() { // the ranks can too: the switch round trip ran on one CPU
					n += wantRows(t, rows, []string{"floor-switch"}, "shm", []int{0}, lat)
				}
				if len(floors) != n {
					t.Errorf("%s: floor rows %v, want exactly %d", bench, floors, n)
				}
				if bench == "floor" && len(rows) != n {
					t.Errorf("floor printed %d rows, want only the %d floor rows:\n%s", len(rows), n, out)
				}
				for _, b := range []string{"floor-pingpong,shm,8,", "floor-twoline,shm,8,", "floor-oneline,shm,8,", "floor-ringflood,shm,8,", "floor-flagbarrier,shm,0,", "floor-copyecho,shm,4096,", "floor-copyecho,shm,65536,", "floor-copy,local,65536,", "floor-copy,local,1048576,", "floor-switch,shm,0,"} {
					if rows[b+"min"] > rows[b+"median"] {
						t.Errorf("%s: min %v > median %v", b, rows[b+"min"], rows[b+"median"])
					}
				}
			})
		}
		t.Run(p.name+"/table", func(t *testing.T) {
			out := runJob(t, p.env, "floor", "-iters", "2000", "-batches", "10")
			if spmdtest.InRank() {
				return
			}
			want := []string{"cache-line ping-pong round trip", "two-line ping-pong round trip", "one-line ping-pong round trip (duo line)", "round trip (", "two-process flag barrier", "copy echo round trip (copy(), heap->A->B)", "copy() in one rank's heap"}
			if p.name == "smp-am" {
				want = []string{"floor: rank 1's segment is not mapped"}
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("gexbench floor's table lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// canPinCPU0 reports whether a thread of this process may run on CPU 0
// alone (then so may the ranks of the jobs it starts); the thread gets its
// CPU set back.
func canPinCPU0() bool {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, cpu0 unix.CPUSet
	cpu0.Set(0)
	if unix.SchedGetaffinity(0, &old) != nil || unix.SchedSetaffinity(0, &cpu0) != nil {
		return false
	}
	return unix.SchedSetaffinity(0, &old) == nil
}
