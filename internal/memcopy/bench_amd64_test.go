//go:build amd64 && !race

package memcopy

import "testing"

func init() { benchCopies = append(benchCopies, benchCopy{"erms", copyERMS}) }

// TestCopyERMS checks the REP MOVSB reference the benchmarks measure.
func TestCopyERMS(t *testing.T) {
	for _, n := range []int{0, 100, 2048, 5000, 65536 + 33, 1<<20 + 7} {
		for _, a := range []int{0, 1, 31, 32} {
			src := pattern(n+64, 3)
			got := pattern(n+64, 4)
			want := append([]byte(nil), got...)
			copyERMS(got[a:a+n], src[a:a+n])
			copy(want[a:a+n], src[a:a+n])
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("n=%d a=%d: byte %d differs", n, a, i)
				}
			}
		}
	}
}
