package gasnet_test

import (
	"testing"

	"github.com/gexgo/gexgo/gasnet"
)

func nop(*gasnet.Token, []byte, []gasnet.HandlerArg) {}

// TestAttachCollectiveFailure: a node whose segsize is not a multiple of the
// page fails its local check, and every node returns an error naming it.
func TestAttachCollectiveFailure(t *testing.T) {
	body := func(e *env) {
		size := uint64(1 << 16)
		if e.me == 1 {
			size = 1000
		}
		err := e.j.Attach(nil, size, 0)
		if e.me == 1 {
			e.Want(err, gasnet.ErrBadArg, "Attach(segsize 1000)", "segsize 1000", "GASNET_PAGESIZE")
		} else {
			e.Want(err, gasnet.ErrBadArg, "Attach beside a failing node", "node(s) 1")
		}
	}
	run(t, 2, modeLoop, body)
	run(t, 2, modeSMP, body)
}

// TestAttachArgs: the handler table rules and MINHEAPOFFSET agreement.
func TestAttachArgs(t *testing.T) {
	run(t, 2, modeLoop, func(e *env) {
		e.Want(e.j.Attach(nil, 1<<16, uint64(e.me)*gasnet.PageSize), gasnet.ErrBadArg, "different minheapoffset", "same minheapoffset")
	})
	run(t, 1, modeLoop, func(e *env) {
		e.Want(e.j.Attach([]gasnet.HandlerEntry{{Index: 5, Fn: nop}}, 0, 0), gasnet.ErrBadArg, "reserved index", "index 5 is reserved")
	})
	run(t, 1, modeLoop, func(e *env) {
		e.Want(e.j.Attach([]gasnet.HandlerEntry{{Index: 130, Fn: nop}, {Index: 130, Fn: nop}}, 0, 0), gasnet.ErrBadArg, "duplicate index", "appears twice")
	})
	run(t, 1, modeLoop, func(e *env) {
		e.Want(e.j.Attach([]gasnet.HandlerEntry{{Index: 130}}, 0, 0), gasnet.ErrBadArg, "nil handler", "Fn is nil")
	})
	run(t, 1, modeLoop, func(e *env) {
		max := e.j.GetMaxLocalSegmentSize()
		e.Want(e.j.Attach(nil, max+gasnet.PageSize, 0), gasnet.ErrBadArg, "segsize over the max", "exceeds")
	})
}

// TestAttachNoSegment: segsize 0 everywhere gives a job without segments (AMs
// work, transfers are refused); 0 on one node only gives it one page.
func TestAttachNoSegment(t *testing.T) {
	run(t, 2, modeLoop, func(e *env) {
		var got int
		table := []gasnet.HandlerEntry{{Fn: func(*gasnet.Token, []byte, []gasnet.HandlerArg) { got++ }}}
		e.Check(e.j.Attach(table, 0, 0), "Attach(0)")
		info := make([]gasnet.SegInfo, 2)
		e.Check(e.j.GetSegmentInfo(info), "GetSegmentInfo")
		if info[0] != (gasnet.SegInfo{}) || info[1] != (gasnet.SegInfo{}) || e.j.Segment() != nil {
			e.Fatalf("segments without segsize: %+v", info)
		}
		e.Want(e.j.Put(1-e.me, 0, []byte{1}), gasnet.ErrBadArg, "Put without segments", "no bound segment")
		e.Check(e.j.AMRequestShort(e.me, table[0].Index), "AMRequestShort")
		e.Check(e.j.BlockUntil(func() bool { return got == 1 }), "BlockUntil")
	})
	body := func(e *env) {
		size := uint64(0)
		if e.me == 1 {
			size = 4 * gasnet.PageSize
		}
		e.Check(e.j.Attach(nil, size, 0), "Attach")
		info := make([]gasnet.SegInfo, 2)
		e.Check(e.j.GetSegmentInfo(info), "GetSegmentInfo")
		if info[0].Size != gasnet.PageSize || info[1].Size != 4*gasnet.PageSize {
			e.Fatalf("segment sizes %d and %d, want one page and 4 pages", info[0].Size, info[1].Size)
		}
	}
	run(t, 2, modeLoop, body)
	run(t, 2, modeSMP, body)
}
