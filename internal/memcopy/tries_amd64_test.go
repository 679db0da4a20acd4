//go:build amd64 && !race

package memcopy

import (
	"bytes"
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"
)

type try struct {
	name string
	fn   func(dst, src []byte) int
}

var tries = []try{
	{"none", func(d, s []byte) int { return 0 }},
	{"go", func(d, s []byte) int { return copy(d, s) }},
	{"avx", func(d, s []byte) int { return viaMove(d, s, 32, 128, avxMove) }},
	{"pfw", func(d, s []byte) int { return viaMove(d, s, 32, 128, pfwMove) }},
	{"pfwd", func(d, s []byte) int { return viaMove(d, s, 32, 128, pfwDistMove) }},
	{"pfs", func(d, s []byte) int { return viaMove(d, s, 32, 128, pfsMove) }},
	{"pfb", func(d, s []byte) int { return viaMove(d, s, 32, 128, pfbMove) }},
	{"z512", func(d, s []byte) int { return viaMove(d, s, 64, 256, z512Move) }},
	{"nt", func(d, s []byte) int { return viaMove(d, s, 32, 128, ntMove) }},
	{"ntz", func(d, s []byte) int { return viaMove(d, s, 64, 256, ntZMove) }},
	{"ntpf", func(d, s []byte) int { return viaMove(d, s, 32, 128, ntPf(2048)) }},
	{"ntpf512", func(d, s []byte) int { return viaMove(d, s, 32, 128, ntPf(512)) }},
	{"ntpf1k", func(d, s []byte) int { return viaMove(d, s, 32, 128, ntPf(1024)) }},
	{"ntpf4k", func(d, s []byte) int { return viaMove(d, s, 32, 128, ntPf(4096)) }},
}

func TestTries(t *testing.T) {
	for _, c := range tries[1:] {
		if (c.name == "z512" || c.name == "ntz") && !cpu.X86.HasAVX512F {
			continue
		}
		for _, n := range []int{0, 100, 255, 256, 511, 512, 2048, 4095, 4096, 65536 + 33} {
			for _, a := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {7, 13}, {63, 1}, {32, 32}} {
				src := pattern(a[0]+n+64, 0x5a)
				got := pattern(a[1]+n+64, 0xa5)
				want := bytes.Clone(got)
				c.fn(got[a[1]:a[1]+n], src[a[0]:a[0]+n])
				copy(want[a[1]:a[1]+n], src[a[0]:a[0]+n])
				if !bytes.Equal(got, want) {
					t.Fatalf("%s n=%d a=%v differs", c.name, n, a)
				}
			}
		}
	}
}

var trySizes = []int{2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10}

// BenchmarkMediumTries: the Medium echo (A: hot src -> X, B: X -> Y) with
// A and B using the same candidate (name) or A/B different (nameA+nameB).
func BenchmarkMediumTries(b *testing.B) {
	combos := [][2]try{}
	for _, c := range tries {
		combos = append(combos, [2]try{c, c})
	}
	combos = append(combos, [2]try{tries[8], tries[1]}, [2]try{tries[1], tries[8]})
	for _, n := range trySizes {
		for _, c := range combos {
			name := c[0].name
			if c[1].name != c[0].name {
				name += "+" + c[1].name
			}
			b.Run(sizeName(n)+"/"+name, func(b *testing.B) {
				src, x, y := pattern(n, 1), make([]byte, n), make([]byte, n)
				b.SetBytes(int64(2 * n))
				pingPong(b, func() { c[0].fn(x, src) }, func() { c[1].fn(y, x) })
			})
		}
	}
}

// BenchmarkMediumRotate: the Medium echo with copy, X and Y each one of k
// buffers used round robin (the pool's rotation) instead of one.
func BenchmarkMediumRotate(b *testing.B) {
	for _, n := range trySizes {
		for _, k := range []int{1, 2, 4} {
			b.Run(sizeName(n)+"/"+string(rune('0'+k)), func(b *testing.B) {
				src := pattern(n, 1)
				x, y := make([]byte, k*n), make([]byte, k*n)
				b.SetBytes(int64(2 * n))
				i, j := 0, 0
				pingPong(b, func() { copy(x[i*n:(i+1)*n], src); i = (i + 1) % k }, func() { copy(y[j*n:(j+1)*n], x[j*n:(j+1)*n]); j = (j + 1) % k })
			})
		}
	}
}

func ntPf(dist uintptr) func(d, s unsafe.Pointer, n uintptr) {
	return func(d, s unsafe.Pointer, n uintptr) { ntPfMove(d, s, n, dist) }
}

// BenchmarkLongTries: the Long echo (A: Y -> X, B: X -> Y) for the
// non-temporal candidates.
func BenchmarkLongTries(b *testing.B) {
	for _, n := range []int{32 << 10, 64 << 10, 256 << 10, 1 << 20} {
		for _, c := range tries {
			if c.name != "none" && c.name != "nt" && c.name != "ntpf" && c.name != "ntpf1k" {
				continue
			}
			b.Run(sizeName(n)+"/"+c.name, func(b *testing.B) {
				x, y := pattern(n, 1), make([]byte, n)
				b.SetBytes(int64(2 * n))
				pingPong(b, func() { c.fn(x, y) }, func() { c.fn(y, x) })
			})
		}
	}
}
