package gex_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// TestAMPathTargetRefuses: on path (b) the target checks every remote range
// against its own segment ("checked ... again at the target for path (b)"). A
// put or get that the initiator let through (its table is bypassed here) must
// complete with an error naming the refusal, write nothing at the target, and
// not hang.
func TestAMPathTargetRefuses(t *testing.T) {
	const segSize = 1 << 16
	conformance(t, 2, jobOpts{segSize: segSize, supernode: 1}, func(e *rankEnv) {
		peer := 1 - e.rank
		before := append([]byte(nil), e.seg.Bytes()...)
		e.Barrier() // everyone took its snapshot
		bs, _, err := e.tm.QueryBoundSegmentNB(peer, gex.FlagImmediate)
		e.Check(err, "QueryBoundSegmentNB")
		if bs.Local != nil {
			e.Fatalf("peer segment is mapped with supernode 1")
		}
		end := uint64(bs.Owner) + bs.Size
		for _, c := range []struct {
			name  string
			raddr uint64
			n     int
		}{
			{"straddling the end", end - 8, 16},
			{"past the end", end + 4096, 8},
			{"before the base", uint64(bs.Owner) - 64, 8},
		} {
			buf := bytes.Repeat([]byte{0xAB}, c.n)
			if err := gex.RawRMA(e.tm, true, peer, c.raddr, buf); err == nil || !errors.Is(err, gex.ErrBadArg) {
				e.Fatalf("put %s: got %v, want an error wrapping ErrBadArg", c.name, err)
			}
			if err := gex.RawRMA(e.tm, false, peer, c.raddr, buf); err == nil || !errors.Is(err, gex.ErrBadArg) {
				e.Fatalf("get %s: got %v, want an error wrapping ErrBadArg", c.name, err)
			}
		}
		e.Barrier() // every refused put has been answered
		if !bytes.Equal(before, e.seg.Bytes()) {
			e.Fatalf("a refused put changed this rank's segment")
		}
	})
}
