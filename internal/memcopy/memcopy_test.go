package memcopy

import (
	"bytes"
	"testing"
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

// copies are the package's copy functions: every test runs each of them.
var copies = []struct {
	name string
	f    func(dst, src []byte) int
}{{"Copy", Copy}, {"CopyHot", CopyHot}, {"CopyNT", CopyNT}}

// forCopies runs f as a subtest with each of copies.
func forCopies(t *testing.T, f func(t *testing.T, cp func(dst, src []byte) int)) {
	for _, c := range copies {
		t.Run(c.name, func(t *testing.T) { f(t, c.f) })
	}
}

// check copies src[so:so+n] to dst[do:do+n] with cp and compares the result
// with what copy makes of the same buffers: the bytes outside the range too.
func check(t *testing.T, cp func(dst, src []byte) int, n, so, do int) {
	t.Helper()
	src := pattern(so+n+64, 0x5a)
	got := pattern(do+n+64, 0xa5)
	want := bytes.Clone(got)
	if c := cp(got[do:do+n], src[so:so+n]); c != n {
		t.Fatalf("n=%d so=%d do=%d: returned %d", n, so, do, c)
	}
	copy(want[do:do+n], src[so:so+n])
	if !bytes.Equal(got, want) {
		t.Fatalf("n=%d so=%d do=%d: wrote other bytes than copy", n, so, do)
	}
}

func TestCopyLengths(t *testing.T) { forCopies(t, testCopyLengths) }

func testCopyLengths(t *testing.T, cp func(dst, src []byte) int) {
	check := func(t *testing.T, n, so, do int) { t.Helper(); check(t, cp, n, so, do) }
	for n := 0; n <= 300; n++ {
		check(t, n, 0, 0)
		check(t, n, 3, 5)
	}
	// Every head (dst alignment mod 32) and tail (length mod 128) of the
	// non-temporal path, with src both aligned with dst and not.
	for _, from := range []int{NTMin - 1, Threshold} {
		for n := from; n <= from+130; n++ {
			for do := 0; do < 33; do += 1 + n%3 {
				check(t, n, do, do)
				check(t, n, (do+5)%64, do)
			}
		}
	}
	// CopyHot's REP MOVSB lengths and their edges, at every alignment of
	// dst and some of src.
	for _, n := range []int{HotMin - 1, HotMin, HotMin + 1, 3000, HotMax - 1, HotMax, HotMax + 1} {
		for do := 0; do < 64; do++ {
			check(t, n, do, do)
			check(t, n, (do*7)%64, do)
		}
	}
	for _, n := range []int{Threshold - 1, Threshold, Threshold + 1, 4095, 4096, 4097, 65535, 65536 + 33, 1<<20 + 7, 3<<20 - 1} {
		for _, a := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {7, 13}, {63, 1}, {32, 32}} {
			check(t, n, a[0], a[1])
		}
	}
}

// TestCopyCount: Copy and CopyHot copy min(len(dst), len(src)) bytes, as
// copy does.
func TestCopyCount(t *testing.T) {
	forCopies(t, func(t *testing.T, cp func(dst, src []byte) int) {
		for _, c := range [][2]int{{0, 5000}, {5000, 0}, {Threshold + 10, 100000}, {100000, Threshold + 10}, {10, 20}, {HotMax, HotMax + 100}, {HotMax + 100, HotMin}, {NTMin, NTMin + 1}, {NTMin + 1, NTMin}} {
			src := pattern(c[1], 1)
			dst := make([]byte, c[0])
			want := min(c[0], c[1])
			if n := cp(dst, src); n != want || !bytes.Equal(dst[:n], src[:n]) {
				t.Fatalf("len(dst)=%d len(src)=%d: returned %d, want %d (or the bytes differ)", c[0], c[1], n, want)
			}
		}
	})
}

// TestCopyOverlap: overlapping slices copy as with copy (memmove semantics),
// in both directions and at the same address.
func TestCopyOverlap(t *testing.T) {
	forCopies(t, func(t *testing.T, cp func(dst, src []byte) int) {
		for _, n := range []int{100, NTMin, HotMin, HotMax, Threshold, 10000, 70000} {
			for _, shift := range []int{-n / 2, -1, 0, 1, 63, n / 2, n - 1} {
				got := pattern(3*n+2, 9)
				want := bytes.Clone(got)
				so, do := n+1, n+1+shift
				if cp(got[do:do+n], got[so:so+n]) != n {
					t.Fatal("short count")
				}
				copy(want[do:do+n], want[so:so+n])
				if !bytes.Equal(got, want) {
					t.Fatalf("n=%d shift=%d: overlapping copy differs from copy", n, shift)
				}
			}
		}
	})
}

func TestCopyAllocs(t *testing.T) {
	src, dst := pattern(1<<16, 1), make([]byte, 1<<16)
	if a := testing.AllocsPerRun(100, func() { Copy(dst, src); Copy(dst[:100], src) }); a != 0 {
		t.Fatalf("Copy allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(100, func() { CopyHot(dst[:HotMax], src); CopyHot(dst[:100], src) }); a != 0 {
		t.Fatalf("CopyHot allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(100, func() { CopyNT(dst[:NTMin], src); CopyNT(dst, src); CopyNT(dst[:100], src) }); a != 0 {
		t.Fatalf("CopyNT allocates %v times per call", a)
	}
}
