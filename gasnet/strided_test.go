package gasnet_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/gexgo/gexgo/gasnet"
)

// designB walks the elements of a design-B section (VIS proposal 6.2):
// count[0] contiguous bytes, count[1..L] elements per level, strides in
// bytes; f gets each contiguous run's offset on each side.
func designB(count, sstr, dstr []int, L int, f func(soff, doff, n int)) {
	idx := make([]int, L)
	for {
		so, do := 0, 0
		for k := 0; k < L; k++ {
			so += idx[k] * sstr[k]
			do += idx[k] * dstr[k]
		}
		f(so, do, count[0])
		k := 0
		for ; k < L; k++ {
			idx[k]++
			if idx[k] < count[k+1] {
				break
			}
			idx[k] = 0
		}
		if k == L {
			return
		}
	}
}

// TestStridedDesignB: random design-B sections (0..3 stride levels, random
// slack in the strides) put with PutsBulk/NB/NBI to node 1 and read back with
// GetsBulk/NB/NBI, against a byte model, on the mapped and the AM path.
func TestStridedDesignB(t *testing.T) {
	for _, sn := range []int{0, 1} {
		p := newPair(t, sn)
		rng := rand.New(rand.NewPCG(1, uint64(sn)))
		const area = 1 << 16
		remote := make([]byte, area) // model of node 1's first 64 KiB
		if err := p.j.Memset(1, p.segs[1].Addr, 0, area); err != nil {
			t.Fatal(err)
		}
		extent := func(count, str []int, L int) int {
			e := count[0]
			for k := 0; k < L; k++ {
				e += (count[k+1] - 1) * str[k]
			}
			return e
		}
		gen := func(count []int, L int) []int {
			str := make([]int, L)
			prev := count[0]
			for k := 0; k < L; k++ {
				str[k] = prev + rng.IntN(5)
				prev = count[k+1] * str[k]
			}
			return str
		}
		for iter := 0; iter < 200; iter++ {
			L := rng.IntN(4)
			count := make([]int, L+1)
			count[0] = 1 + rng.IntN(16)
			for k := 1; k <= L; k++ {
				count[k] = 1 + rng.IntN(4)
			}
			sstr, dstr := gen(count, L), gen(count, L)
			se, de := extent(count, sstr, L), extent(count, dstr, L)
			if de > area {
				continue
			}
			doff := rng.IntN(area - de + 1)
			src := make([]byte, se)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			dst := p.segs[1].Addr + gasnet.Addr(doff)
			var err error
			var h gasnet.Handle
			switch iter % 3 {
			case 0:
				err = p.j.PutsBulk(1, dst, dstr, src, sstr, count, L)
			case 1:
				h, err = p.j.PutsNBBulk(1, dst, dstr, src, sstr, count, L)
				if err == nil {
					err = p.j.WaitSyncnb(h)
				}
			case 2:
				err = p.j.PutsNBIBulk(1, dst, dstr, src, sstr, count, L)
				if err == nil {
					err = p.j.WaitSyncnbiPuts()
				}
			}
			if err != nil {
				t.Fatalf("iter %d: put count %v sstr %v dstr %v: %v", iter, count, sstr, dstr, err)
			}
			designB(count, sstr, dstr, L, func(so, do, n int) { copy(remote[doff+do:][:n], src[so:][:n]) })
			got := make([]byte, area)
			if err := p.j.GetBulk(got, 1, p.segs[1].Addr); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, remote) {
				t.Fatalf("iter %d (count %v, sstr %v, dstr %v): node 1's bytes differ from the model at %d", iter, count, sstr, dstr, firstDiff(got, remote))
			}
			// Read the section back into a fresh local buffer.
			back := make([]byte, se)
			want := make([]byte, se)
			designB(count, sstr, dstr, L, func(so, do, n int) { copy(want[so:][:n], remote[doff+do:][:n]) })
			switch iter % 3 {
			case 0:
				err = p.j.GetsBulk(back, sstr, 1, dst, dstr, count, L)
			case 1:
				h, err = p.j.GetsNBBulk(back, sstr, 1, dst, dstr, count, L)
				if err == nil {
					err = p.j.WaitSyncnb(h)
				}
			case 2:
				err = p.j.GetsNBIBulk(back, sstr, 1, dst, dstr, count, L)
				if err == nil {
					err = p.j.WaitSyncnbiGets()
				}
			}
			if err != nil || !bytes.Equal(back, want) {
				t.Fatalf("iter %d: strided get: %v, bytes equal %v", iter, err, bytes.Equal(back, want))
			}
		}
		p.stop()
	}
}
