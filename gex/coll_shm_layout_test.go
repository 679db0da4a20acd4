package gex

import (
	"encoding/binary"
	"testing"

	"github.com/gexgo/gexgo/internal/conduit/smp"
)

// TestCollAreaLayout pins the collective area's layout (coll_shm.go):
// gex's part after the conduit's header line, team lines and ring parts on
// their own 64-byte lines, every atomic word 8-byte aligned inside its
// line, the ring's chunks inside the area, and views that fit every line.
func TestCollAreaLayout(t *testing.T) {
	for name, off := range map[string]int{"slots": offSlots, "ring": offRing, "ring buffers": offRingBuf, "contributions": offSmall, "contribution stride": smallStride} {
		if off%64 != 0 {
			t.Errorf("%s at %d: not 64-byte aligned", name, off)
		}
	}
	if offSlots < smp.CollAreaHeader {
		t.Errorf("team lines at %d overlap the conduit's header (%d bytes)", offSlots, smp.CollAreaHeader)
	}
	if offRing < offSlots+collSlots*lineBytes || offRingBuf < offRing+(1+ringSlots)*lineBytes {
		t.Errorf("parts overlap: lines end at %d, ring at %d, its buffers at %d", offSlots+collSlots*lineBytes, offRing, offRingBuf)
	}
	if offSmall < offRingBuf+ringSlots*ringChunk || smallLines > collSlots || smallPart%64 != 0 || smallPart < 8+smallMax {
		t.Errorf("contributions at %d overlap the ring (ends at %d), or %d of %d lines, %d-byte buffers", offSmall, offRingBuf+ringSlots*ringChunk, smallLines, collSlots, smallMax)
	}
	if collEnd > smp.CollAreaSize {
		t.Errorf("the layout ends at %d, past the %d-byte area", collEnd, smp.CollAreaSize)
	}
	seen := map[int]string{}
	for name, w := range map[string]int{"id": lineID, "arrive": lineArrive, "release": lineRelease,
		"idf0": lineIDF, "idf0.id": lineIDF + 8, "idf1": lineIDF + 16, "idf1.id": lineIDF + 24, "merged": lineMerged} {
		if w%8 != 0 || w+8 > lineBytes {
			t.Errorf("line word %s at %d: not an aligned word inside the %d-byte line", name, w, lineBytes)
		}
		if other, dup := seen[w]; dup {
			t.Errorf("line words %s and %s share offset %d", name, other, w)
		}
		seen[w] = name
	}
	area := make([]byte, smp.CollAreaSize) // 8-aligned, as a mapping is page-aligned
	for s := 0; s < collSlots; s++ {
		v := lineAt(area, s)
		v.arrive.Store(uint64(s + 1))
	}
	for s := 0; s < collSlots; s++ {
		if got := lineAt(area, s).arrive.Load(); got != uint64(s+1) {
			t.Fatalf("line %d reads arrive %d, want %d (lines overlap)", s, got, s+1)
		}
	}
	rg := ringAt(area)
	if len(rg.buf) != ringSlots*ringChunk {
		t.Errorf("ring buffer of %d bytes, want %d", len(rg.buf), ringSlots*ringChunk)
	}
	for s := 0; s < smallLines; s++ {
		v := smallAt(area, s, false)
		binary.LittleEndian.PutUint64(v.size[1], uint64(s+2))
		v.buf[1][smallMax-1] = byte(s + 3)
		v.buf[0][smallMax-1] = byte(s + 4)
	}
	for s := 0; s < smallLines; s++ {
		// The hierarchical words lie after the buffers, inside the part.
		h := smallAt(area, s, true)
		h.done.Store(uint64(s + 5))
		h.ready.Store(uint64(s + 6))
	}
	for s := 0; s < smallLines; s++ {
		v, h := smallAt(area, s, false), smallAt(area, s, true)
		if h.done.Load() != uint64(s+5) || h.ready.Load() != uint64(s+6) {
			t.Fatalf("contribution part %d: a hierarchical word overlaps another part", s)
		}
		if binary.LittleEndian.Uint64(v.size[1]) != uint64(s+2) || v.buf[1][smallMax-1] != byte(s+3) || v.buf[0][smallMax-1] != byte(s+4) || binary.LittleEndian.Uint64(v.size[0]) != 0 {
			t.Fatalf("contribution part %d overlaps another", s)
		}
		if v.done != lineAt(area, s).release {
			t.Fatalf("line %d: the done count is not the team line's release word", s)
		}
	}
	rg.done[ringSlots-1].Store(7)
	if rg.tag.Load() != 0 || rg.fill.Load() != 0 || lineAt(area, collSlots-1).arrive.Load() != collSlots {
		t.Errorf("the ring's counters overlap its header or the last team line")
	}
}
