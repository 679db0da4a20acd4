package gasnet

import (
	"fmt"
	"math"

	"github.com/gexgo/gexgo/gex"
)

// GASNet-1 VIS (the GASNet VIS proposal v2.0: vector design A, indexed design
// B, strided design B) on the gex VIS engine. Only _bulk forms exist in the
// proposal. The local side is Go memory: a vector or indexed local list is
// [][]byte (indexed: the first len bytes of each slice), a strided local side
// is a []byte whose first byte is the base address.
//
// Metadata lifetime: the proposal lets an implementation read srclist,
// dstlist, strides and count until the operation is synchronised; gex reads
// them all before returning, except that a vector or indexed get from a
// non-neighbourhood node keeps writing through its local destination list
// until completion (which the proposal permits). Degenerate cases follow the
// proposal: empty lists (or zero lengths) are no-ops; for strided, any
// count[i] == 0 is a no-op with every other argument ignored, and
// stridelevels 0 is a contiguous copy of count[0] bytes with the strides
// ignored.

// Memvec is gasnet_memvec_t for a remote region.
type Memvec = gex.Memvec

// PutvBulk implements gasnet_putv_bulk: the bytes of srclist, in order, fill
// the regions of dstlist on node, in order (the totals must be equal).
func (j *Job) PutvBulk(node Node, dstlist []Memvec, srclist [][]byte) error {
	return j.visErr("gasnet_putv_bulk", j.tm.VectorPutBlocking(gex.Rank(node), dstlist, srclist, 0))
}

// PutvNBBulk implements gasnet_putv_nb_bulk.
func (j *Job) PutvNBBulk(node Node, dstlist []Memvec, srclist [][]byte) (Handle, error) {
	h, err := j.tm.VectorPutNB(gex.Rank(node), dstlist, srclist, 0)
	return h, j.visErr("gasnet_putv_nb_bulk", err)
}

// PutvNBIBulk implements gasnet_putv_nbi_bulk.
func (j *Job) PutvNBIBulk(node Node, dstlist []Memvec, srclist [][]byte) error {
	return j.visErr("gasnet_putv_nbi_bulk", j.tm.VectorPutNBI(gex.Rank(node), dstlist, srclist, 0))
}

// GetvBulk implements gasnet_getv_bulk.
func (j *Job) GetvBulk(dstlist [][]byte, node Node, srclist []Memvec) error {
	return j.visErr("gasnet_getv_bulk", j.tm.VectorGetBlocking(dstlist, gex.Rank(node), srclist, 0))
}

// GetvNBBulk implements gasnet_getv_nb_bulk.
func (j *Job) GetvNBBulk(dstlist [][]byte, node Node, srclist []Memvec) (Handle, error) {
	h, err := j.tm.VectorGetNB(dstlist, gex.Rank(node), srclist, 0)
	return h, j.visErr("gasnet_getv_nb_bulk", err)
}

// GetvNBIBulk implements gasnet_getv_nbi_bulk.
func (j *Job) GetvNBIBulk(dstlist [][]byte, node Node, srclist []Memvec) error {
	return j.visErr("gasnet_getv_nbi_bulk", j.tm.VectorGetNBI(dstlist, gex.Rank(node), srclist, 0))
}

// PutiBulk implements gasnet_puti_bulk: dstlist names regions of dstlen
// bytes on node, srclist local regions of srclen bytes (the first srclen
// bytes of each slice); len(dstlist)*dstlen must equal len(srclist)*srclen.
func (j *Job) PutiBulk(node Node, dstlist []Addr, dstlen int, srclist [][]byte, srclen int) error {
	return j.visErr("gasnet_puti_bulk", j.tm.IndexedPutBlocking(gex.Rank(node), dstlist, dstlen, srclist, srclen, 0))
}

// PutiNBBulk implements gasnet_puti_nb_bulk.
func (j *Job) PutiNBBulk(node Node, dstlist []Addr, dstlen int, srclist [][]byte, srclen int) (Handle, error) {
	h, err := j.tm.IndexedPutNB(gex.Rank(node), dstlist, dstlen, srclist, srclen, 0)
	return h, j.visErr("gasnet_puti_nb_bulk", err)
}

// PutiNBIBulk implements gasnet_puti_nbi_bulk.
func (j *Job) PutiNBIBulk(node Node, dstlist []Addr, dstlen int, srclist [][]byte, srclen int) error {
	return j.visErr("gasnet_puti_nbi_bulk", j.tm.IndexedPutNBI(gex.Rank(node), dstlist, dstlen, srclist, srclen, 0))
}

// GetiBulk implements gasnet_geti_bulk.
func (j *Job) GetiBulk(dstlist [][]byte, dstlen int, node Node, srclist []Addr, srclen int) error {
	return j.visErr("gasnet_geti_bulk", j.tm.IndexedGetBlocking(dstlist, dstlen, gex.Rank(node), srclist, srclen, 0))
}

// GetiNBBulk implements gasnet_geti_nb_bulk.
func (j *Job) GetiNBBulk(dstlist [][]byte, dstlen int, node Node, srclist []Addr, srclen int) (Handle, error) {
	h, err := j.tm.IndexedGetNB(dstlist, dstlen, gex.Rank(node), srclist, srclen, 0)
	return h, j.visErr("gasnet_geti_nb_bulk", err)
}

// GetiNBIBulk implements gasnet_geti_nbi_bulk.
func (j *Job) GetiNBIBulk(dstlist [][]byte, dstlen int, node Node, srclist []Addr, srclen int) error {
	return j.visErr("gasnet_geti_nbi_bulk", j.tm.IndexedGetNBI(dstlist, dstlen, gex.Rank(node), srclist, srclen, 0))
}

// strided is a design-B strided call translated to gex's convention.
type strided struct {
	elemsz int
	count  []int // gex count: design B's count[1:stridelevels+1]
	ds, ss []int
	noop   bool
}

// stridedB checks design B's arguments (VIS proposal 6.2): count has
// stridelevels+1 entries, count[0] in bytes; strides have stridelevels
// positive entries in bytes, "monotonically increasing and [not specifying]
// overlapping locations": strides[0] >= count[0] and strides[i] >=
// count[i]*strides[i-1].
func stridedB(op string, dststrides, srcstrides, count []int, stridelevels int) (strided, error) {
	bad := func(format string, args ...any) (strided, error) {
		return strided{}, newErr(op, ErrCodeBadArg, fmt.Sprintf(format, args...))
	}
	if stridelevels < 0 {
		return bad("stridelevels %d is negative", stridelevels)
	}
	if len(count) < stridelevels+1 {
		return bad("count has %d entries; stridelevels %d needs %d", len(count), stridelevels, stridelevels+1)
	}
	for i, c := range count[:stridelevels+1] {
		if c < 0 {
			return bad("count[%d] = %d is negative", i, c)
		}
	}
	for _, c := range count[:stridelevels+1] {
		if c == 0 {
			return strided{noop: true}, nil // "the other arguments are ignored"
		}
	}
	if stridelevels == 0 {
		return strided{elemsz: count[0]}, nil // contiguous; strides ignored
	}
	for _, s := range []struct {
		name    string
		strides []int
	}{{"dststrides", dststrides}, {"srcstrides", srcstrides}} {
		if len(s.strides) < stridelevels {
			return bad("%s has %d entries; stridelevels is %d", s.name, len(s.strides), stridelevels)
		}
		if s.strides[0] < count[0] {
			return bad("%s[0] = %d is below count[0] = %d (design B strides must not overlap)", s.name, s.strides[0], count[0])
		}
		for i := 1; i < stridelevels; i++ {
			if count[i] > math.MaxInt/s.strides[i-1] || s.strides[i] < count[i]*s.strides[i-1] {
				return bad("%s[%d] = %d is below count[%d]*%s[%d] = %d*%d (design B strides must increase without overlap)", s.name, i, s.strides[i], i, s.name, i-1, count[i], s.strides[i-1])
			}
		}
	}
	return strided{elemsz: count[0], count: count[1 : stridelevels+1], ds: dststrides[:stridelevels], ss: srcstrides[:stridelevels]}, nil
}

// PutsBulk implements gasnet_puts_bulk (strided design B): the
// count[0]-byte rows of the stridelevels+1-dimensional section at src (local;
// src[0] is srcaddr) go to the same section at dstaddr on node.
func (j *Job) PutsBulk(node Node, dstaddr Addr, dststrides []int, src []byte, srcstrides []int, count []int, stridelevels int) error {
	const op = "gasnet_puts_bulk"
	s, err := stridedB(op, dststrides, srcstrides, count, stridelevels)
	if err != nil || s.noop {
		return err
	}
	return j.visErr(op, j.tm.StridedPutBlocking(gex.Rank(node), dstaddr, s.ds, src, 0, s.ss, s.elemsz, s.count, 0))
}

// PutsNBBulk implements gasnet_puts_nb_bulk.
func (j *Job) PutsNBBulk(node Node, dstaddr Addr, dststrides []int, src []byte, srcstrides []int, count []int, stridelevels int) (Handle, error) {
	const op = "gasnet_puts_nb_bulk"
	s, err := stridedB(op, dststrides, srcstrides, count, stridelevels)
	if err != nil || s.noop {
		return InvalidHandle, err
	}
	h, err := j.tm.StridedPutNB(gex.Rank(node), dstaddr, s.ds, src, 0, s.ss, s.elemsz, s.count, 0)
	return h, j.visErr(op, err)
}

// PutsNBIBulk implements gasnet_puts_nbi_bulk.
func (j *Job) PutsNBIBulk(node Node, dstaddr Addr, dststrides []int, src []byte, srcstrides []int, count []int, stridelevels int) error {
	const op = "gasnet_puts_nbi_bulk"
	s, err := stridedB(op, dststrides, srcstrides, count, stridelevels)
	if err != nil || s.noop {
		return err
	}
	return j.visErr(op, j.tm.StridedPutNBI(gex.Rank(node), dstaddr, s.ds, src, 0, s.ss, s.elemsz, s.count, 0))
}

// GetsBulk implements gasnet_gets_bulk: the section at srcaddr on node is
// copied into the same section of dst (local; dst[0] is dstaddr).
func (j *Job) GetsBulk(dst []byte, dststrides []int, node Node, srcaddr Addr, srcstrides []int, count []int, stridelevels int) error {
	const op = "gasnet_gets_bulk"
	s, err := stridedB(op, dststrides, srcstrides, count, stridelevels)
	if err != nil || s.noop {
		return err
	}
	return j.visErr(op, j.tm.StridedGetBlocking(dst, 0, s.ds, gex.Rank(node), srcaddr, s.ss, s.elemsz, s.count, 0))
}

// GetsNBBulk implements gasnet_gets_nb_bulk.
func (j *Job) GetsNBBulk(dst []byte, dststrides []int, node Node, srcaddr Addr, srcstrides []int, count []int, stridelevels int) (Handle, error) {
	const op = "gasnet_gets_nb_bulk"
	s, err := stridedB(op, dststrides, srcstrides, count, stridelevels)
	if err != nil || s.noop {
		return InvalidHandle, err
	}
	h, err := j.tm.StridedGetNB(dst, 0, s.ds, gex.Rank(node), srcaddr, s.ss, s.elemsz, s.count, 0)
	return h, j.visErr(op, err)
}

// GetsNBIBulk implements gasnet_gets_nbi_bulk.
func (j *Job) GetsNBIBulk(dst []byte, dststrides []int, node Node, srcaddr Addr, srcstrides []int, count []int, stridelevels int) error {
	const op = "gasnet_gets_nbi_bulk"
	s, err := stridedB(op, dststrides, srcstrides, count, stridelevels)
	if err != nil || s.noop {
		return err
	}
	return j.visErr(op, j.tm.StridedGetNBI(dst, 0, s.ds, gex.Rank(node), srcaddr, s.ss, s.elemsz, s.count, 0))
}

func (j *Job) visErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return j.fail(op, err)
}
