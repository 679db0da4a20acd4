// Command inlinecheck instantiates the generic fast paths (atomic domains
// over U64 and U32) and calls PutBlocking, GetBlocking, PutNBI and GetNBI in a loop, so
// that TestFastPathInlining can read the compiler's inlining decisions for
// them in a caller; it is built, never run.
package main

import "github.com/gexgo/gexgo/gex"

func main() {
	var ad64 *gex.AD[uint64]
	var ad32 *gex.AD[uint32]
	var r64 uint64
	var r32 uint32
	if ev, err := ad64.OpNB(&r64, 0, 0, gex.OPFAdd, 1, 0, 0); err == nil {
		_ = ev.Wait()
	}
	_ = ad64.OpNBI(&r64, 0, 0, gex.OPFAdd, 1, 0, 0)
	if ev, err := ad32.OpNB(&r32, 0, 0, gex.OPFAdd, 1, 0, 0); err == nil {
		_ = ev.Wait()
	}
	_ = ad32.OpNBI(&r32, 0, 0, gex.OPFAdd, 1, 0, 0)
	var tm *gex.TM
	var buf [8]byte
	rma(tm, buf[:])
}

// rma is a user's loop of 8-byte puts and gets (Blocking and NBI): the whole mapped fast
// path of each must inline here (docs/rma.md, "Fourth pass").
func rma(tm *gex.TM, buf []byte) {
	for range 10 {
		if tm.PutBlocking(1, 0, buf, 0) != nil {
			return
		}
		if tm.GetBlocking(buf, 1, 0, 0) != nil {
			return
		}
		if tm.PutNBI(1, 0, buf, nil, 0) != nil {
			return
		}
		if tm.GetNBI(buf, 1, 0, 0) != nil {
			return
		}
	}
}
