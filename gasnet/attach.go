package gasnet

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/gexgo/gexgo/gex"
)

// The per-node record Attach exchanges (uint64 words, OR-reduced over the
// job with each node filling only its own record): the handler bitmap, the
// requested segment size, MINHEAPOFFSET, and whether the node's arguments
// passed its local checks.
const (
	recHandlers = 0 // 4 words: bit h set if handler h is registered
	recSegsize  = 4
	recMinheap  = 5
	recOK       = 6
	recWords    = 7
)

// Attach implements gasnet_attach (GASNet-1 spec, "gasnet_attach"): it
// registers table's handlers, allocates this node's segment of segsize bytes
// and, acting as a global barrier, returns once every node has attached.
//
// Handler table rules: Index 0 is "don't care": such entries get, in table
// order, the highest index in [128, 255] still free, and the index is written
// back into table (deterministic: the same table gives the same indices on
// every node); other indices must be in [128, 255] (0..127 are GASNet's) and
// distinct. A GASNet-1 handler may be invoked as any category, as a Request
// or a Reply, with 0..16 arguments.
//
// segsize must be a multiple of PageSize, at most GetMaxLocalSegmentSize.
// Sizes may differ across nodes. If every node passes 0 the job has no
// segments; a node that passes 0 while others do not gets a segment of one
// page (see docs/gasnet1.md). minheapoffset must be the same on every node
// (it has no other effect: segments are separate mappings, not carved from
// the heap's neighbourhood).
//
// Attach is collective: a node whose arguments fail its checks still takes
// part, and every node returns an error naming the nodes that failed, so
// nobody hangs. It may be called once.
func (j *Job) Attach(table []HandlerEntry, segsize, minheapoffset uint64) error {
	const op = "gasnet_attach"
	j.attachMu.Lock()
	defer j.attachMu.Unlock()
	if j.attached.Load() {
		return newErr(op, ErrCodeResource, "gasnet_attach may only be called once")
	}
	if err := j.c.CheckRestricted(op); err != nil {
		return err
	}
	argErr := j.checkAttachArgs(table, segsize)
	var entries []gex.AMEntry
	if argErr == nil && len(table) > 0 {
		entries = make([]gex.AMEntry, len(table))
		for i, e := range table {
			entries[i] = gex.AMEntry{Index: e.Index, Fn: e.Fn, Name: e.Name}
		}
		if err := j.ep.RegisterHandlersGASNet1(entries); err != nil {
			argErr = newErr(op, ErrCodeBadArg, err.Error())
		} else {
			for i := range table {
				table[i].Index = entries[i].Index // "modified in place"
			}
		}
	}

	// Exchange every node's record (this is also the attach barrier).
	n := int(j.n)
	mine := make([]byte, n*recWords*8)
	all := make([]byte, len(mine))
	rec := mine[int(j.me)*recWords*8:]
	word := func(b []byte, w int) []byte { return b[w*8 : w*8+8] }
	if argErr == nil {
		for _, e := range entries {
			w := word(rec, recHandlers+int(e.Index)/64)
			binary.NativeEndian.PutUint64(w, binary.NativeEndian.Uint64(w)|1<<(e.Index%64))
		}
		binary.NativeEndian.PutUint64(word(rec, recSegsize), segsize)
		binary.NativeEndian.PutUint64(word(rec, recMinheap), minheapoffset)
		binary.NativeEndian.PutUint64(word(rec, recOK), 1)
	}
	ev, err := j.tm.ReduceToAllNB(all, mine, gex.DTU64, 8, n*recWords, gex.OPOr, nil, nil, 0)
	if err == nil {
		err = ev.Wait()
	}
	if err != nil {
		return newErr(op, ErrCodeResource, "exchanging the handler tables: "+err.Error())
	}
	var failed, heapDiff []string
	anySeg := false
	bitmaps := make([]uint64, n*4)
	minheap0 := binary.NativeEndian.Uint64(word(all, recMinheap))
	for r := 0; r < n; r++ {
		rr := all[r*recWords*8:]
		if binary.NativeEndian.Uint64(word(rr, recOK)) != 1 {
			failed = append(failed, fmt.Sprint(r))
			continue
		}
		for w := 0; w < 4; w++ {
			bitmaps[r*4+w] = binary.NativeEndian.Uint64(word(rr, recHandlers+w))
		}
		if binary.NativeEndian.Uint64(word(rr, recSegsize)) != 0 {
			anySeg = true
		}
		if mh := binary.NativeEndian.Uint64(word(rr, recMinheap)); mh != minheap0 {
			heapDiff = append(heapDiff, fmt.Sprintf("node %d: %d", r, mh))
		}
	}
	switch {
	case argErr != nil:
		return argErr
	case len(failed) > 0:
		return newErr(op, ErrCodeBadArg, "gasnet_attach failed on node(s) "+strings.Join(failed, ", "))
	case len(heapDiff) > 0:
		return newErr(op, ErrCodeBadArg, fmt.Sprintf("all nodes must pass the same minheapoffset: node 0 passed %d, %s", minheap0, strings.Join(heapDiff, ", ")))
	}
	if anySeg {
		size := max(segsize, PageSize)
		seg, err := gex.SegmentAttach(j.tm, size)
		if err != nil {
			return newErr(op, ErrCodeResource, err.Error())
		}
		j.seg = seg
	}
	j.handlers = bitmaps
	j.mapped = make([]bool, n)
	for r := range j.mapped {
		bs, _, _ := j.tm.QueryBoundSegmentNB(gex.Rank(r), 0)
		j.mapped[r] = bs.Local != nil
	}
	j.maxMed = min(j.c.AMLUBRequestMedium(), j.c.AMLUBReplyMedium())
	j.maxLReq = j.c.AMLUBRequestLong()
	j.maxLRep = j.c.AMLUBReplyLong()
	j.attached.Store(true)
	return nil
}

// checkAttachArgs checks what Attach can check locally.
func (j *Job) checkAttachArgs(table []HandlerEntry, segsize uint64) error {
	const op = "gasnet_attach"
	if segsize%PageSize != 0 {
		return newErr(op, ErrCodeBadArg, fmt.Sprintf("segsize %d is not a multiple of GASNET_PAGESIZE (%d)", segsize, PageSize))
	}
	if max := j.GetMaxLocalSegmentSize(); segsize > max {
		return newErr(op, ErrCodeBadArg, fmt.Sprintf("segsize %d exceeds gasnet_getMaxLocalSegmentSize() = %d (GASNET_MAX_SEGSIZE raises it)", segsize, max))
	}
	var seen [256]bool
	for i, e := range table {
		switch {
		case e.Fn == nil:
			return newErr(op, ErrCodeBadArg, fmt.Sprintf("table[%d]: Fn is nil", i))
		case e.Index != 0 && e.Index < gex.AMIndexBase:
			return newErr(op, ErrCodeBadArg, fmt.Sprintf("table[%d]: index %d is reserved for GASNet (client handlers use 128..255, or 0 for don't care)", i, e.Index))
		case e.Index != 0 && seen[e.Index]:
			return newErr(op, ErrCodeBadArg, fmt.Sprintf("table[%d]: index %d appears twice in the table", i, e.Index))
		}
		seen[e.Index] = true
	}
	return nil
}

// GetSegmentInfo implements gasnet_getSegmentInfo: it fills table[i] with the
// segment base address (in node i's address space) and size of node i, for
// every node below len(table); entries past Nodes() are left untouched. A
// node without a segment reports {0, 0}.
func (j *Job) GetSegmentInfo(table []SegInfo) error {
	if err := j.ready("gasnet_getSegmentInfo"); err != nil {
		return err
	}
	for r := 0; r < len(table) && r < int(j.n); r++ {
		bs, _, err := j.tm.QueryBoundSegmentNB(gex.Rank(r), gex.FlagImmediate)
		if err != nil {
			return err
		}
		table[r] = SegInfo{Addr: bs.Owner, Size: bs.Size}
	}
	return nil
}

// Segment returns this node's segment memory (nil before Attach or when the
// job has no segments): what a C client reaches by dereferencing its own
// gasnet_seginfo_t.addr. Its first byte is at GetSegmentInfo's address for
// this node.
func (j *Job) Segment() []byte {
	if j.seg == nil {
		return nil
	}
	return j.seg.Bytes()
}
