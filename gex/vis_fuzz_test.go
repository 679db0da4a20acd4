package gex_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// Fuzzers of VIS descriptors (DESIGN.md: "fuzzers next to every decoder ...
// VIS descriptors"): the target's run-list decoder, fed what a peer could
// send, and the initiator's strided validation, checked against a byte model
// whenever it accepts.

// FuzzVISDecodeRuns: no run list makes the target's decoder panic or accept
// a run outside its segment (the visitor writes into a segment-sized slice,
// which would panic), and an accepted list covers exactly the data.
func FuzzVISDecodeRuns(f *testing.F) {
	const base, size = 0x10000, 4096
	f.Add(gex.VISEncodeRuns(nil, [][2]uint64{{base, 8}, {base + 16, 8}}), 16)
	f.Add(gex.VISEncodeRuns(nil, [][2]uint64{{base + size - 1, 1}}), 1)
	f.Add(gex.VISEncodeRuns(nil, [][2]uint64{{base + 100, 50}, {base, 8}, {base + 4000, 96}}), 154)
	f.Add(gex.VISEncodeRuns(nil, nil), 0)
	f.Add([]byte{0x80, 0x80, 0x80}, 3)
	// Entries of many runs (path (b) merges runs of one length and gap),
	// forwards, backwards, and ones that leave the segment or overflow.
	every := func(from uint64, n, gap, count int) [][2]uint64 {
		var r [][2]uint64
		for i := range count {
			r = append(r, [2]uint64{uint64(int64(from) + int64(i)*int64(n+gap)), uint64(n)})
		}
		return r
	}
	f.Add(gex.VISEncodeRunList(every(base, 8, 8, 256)), 2048)
	f.Add(gex.VISEncodeRunList(append(every(base+64, 4, 12, 100), every(base+size-8, 8, -24, 50)...)), 800)
	f.Add(gex.VISEncodeRunList(every(base, 8, 8, 257)), 2056)                                 // the last run leaves the segment
	f.Add(gex.VISEncodeRunList(every(base+8, 8, -24, 3)), 24)                                 // the last run is below the segment
	f.Add(gex.VISEncodeRunList(every(base, 1, -1, 1000)), 1000)                               // one byte written 1000 times
	f.Add([]byte{0x80, 0x80, 0x04, 0x08, 0xff, 0xff, 0xff, 0xff, 0x0f}, 8)                    // 2^32 runs of 8 bytes
	f.Add([]byte{0x80, 0x80, 0x04, 0x01, 0x00}, 1)                                            // zero runs
	f.Add([]byte{0x80, 0x80, 0x04, 0x00, 0x05}, 0)                                            // runs of zero bytes
	f.Add([]byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x08, 0x03}, 24) // a gap of -2^63
	f.Fuzz(func(t *testing.T, list []byte, total int) {
		if total < 0 || total > 1<<20 {
			return
		}
		seg := make([]byte, size)
		if err := gex.VISDecodeRuns(list, base, size, total, seg); err != nil {
			return
		}
		if got, err := gex.VISDecodeRunsBytes(list, base, size, total); err != nil || got != total {
			t.Fatalf("accepted list visits %d bytes (%v), want exactly the %d data bytes", got, err, total)
		}
		n := 0
		for _, b := range seg {
			if b == 0xff {
				n++
			}
		}
		if n > total {
			t.Fatalf("accepted list marks %d bytes, more than the %d data bytes", n, total)
		}
	})
}

// FuzzVISStrided: random strided metadata (elemsz, up to 4 levels of counts,
// signed strides, base offsets) on a put to self through the mapping. The
// call either fails with GASNET_ERR_BAD_ARG or moves exactly the bytes a
// reference loop moves, and never panics or writes outside its targets.
func FuzzVISStrided(f *testing.F) {
	f.Add(uint8(8), uint8(2), uint8(4), uint8(3), uint8(1), uint8(1), int16(8), int16(32), int16(128), int16(0), int16(8), int16(32), int16(128), int16(0), int16(0), int16(0))
	f.Add(uint8(4), uint8(2), uint8(4), uint8(4), uint8(1), uint8(1), int16(4), int16(16), int16(0), int16(0), int16(16), int16(4), int16(0), int16(0), int16(100), int16(0))
	f.Add(uint8(1), uint8(3), uint8(3), uint8(3), uint8(1), uint8(1), int16(-1), int16(-3), int16(0), int16(0), int16(1), int16(3), int16(0), int16(0), int16(8), int16(8))
	f.Add(uint8(0), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0), int16(0), int16(0), int16(0), int16(0), int16(0), int16(0), int16(0), int16(0), int16(0), int16(0))
	f.Add(uint8(8), uint8(1), uint8(0), uint8(0), uint8(0), uint8(0), int16(0), int16(0), int16(0), int16(0), int16(0), int16(0), int16(0), int16(0), int16(-4), int16(0))
	_, _, tm := selfClient(f)
	seg, err := gex.SegmentAttach(tm, 1<<16)
	if err != nil {
		f.Fatal(err)
	}
	mem := seg.Bytes()
	segBase := seg.QueryAddr()
	f.Fuzz(func(t *testing.T, elemsz, levels, c0, c1, c2, c3 uint8, s0, s1, s2, s3, t0, t1, t2, t3, roff, loff int16) {
		L := int(levels % 5)
		count := []int{int(c0 % 9), int(c1 % 9), int(c2 % 9), int(c3 % 9)}[:L]
		rs := []int{int(s0), int(s1), int(s2), int(s3)}[:L]
		ls := []int{int(t0), int(t1), int(t2), int(t3)}[:L]
		es := int(elemsz % 65)
		src := make([]byte, 4096)
		for i := range src {
			src[i] = byte(i*7 + 1)
		}
		clear(mem)
		want := make([]byte, len(mem))
		dst := segBase + 0x4000 + gex.Addr(roff)
		err := tm.StridedPutBlocking(0, dst, rs, src, int(loff), ls, es, count, 0)
		if err != nil {
			if !errors.Is(err, gex.ErrBadArg) {
				t.Fatalf("error %v does not wrap ErrBadArg", err)
			}
			return
		}
		// Reference: level 0 varies fastest.
		if es > 0 {
			forEachIndex(count, func(idx []int) {
				so, do := int(loff), 0x4000+int(roff)
				for k := range idx {
					so += idx[k] * ls[k]
					do += idx[k] * rs[k]
				}
				copy(want[do:do+es], src[so:so+es])
			})
		}
		if !bytes.Equal(mem, want) {
			t.Fatalf("segment differs from the reference at %d (elemsz %d count %v dst strides %v src strides %v)", firstDiff(mem, want), es, count, rs, ls)
		}
	})
}
