package ptlnet

import (
	"testing"

	"github.com/gexgo/gexgo/internal/shm"
)

// TestLayout: the shared layouts' atomic words are aligned and on cache
// lines of their own, the ring and pool start 64-byte aligned and fit the
// region, and every header Send accepts fits a slot (eager with no payload,
// and as the first frame of a bulk message).
func TestLayout(t *testing.T) {
	check := func(name string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("layout: %s", name)
		}
	}
	check("bell word 64-byte aligned in its page", bellOff%64 == 0 && bellOff+shm.BellSize <= bellRegionSize)
	check("bell clear of the page header", bellOff >= 8)
	check("blocked word 4-byte aligned, on its own line", txOffBlocked%64 == 0 && txOffBlocked >= 8 && txOffBlocked+4 <= txOffRing)
	check("ring 64-byte aligned", txOffRing%64 == 0)
	check("ring fits before the pool", txOffRing+shm.RingBytes(txSlots, txSlotSize) == txPoolOff)
	check("pool 64-byte aligned", txPoolOff%64 == 0)
	check("region holds the pool", txPoolOff+shm.PoolBytes(txBufs, txBufSize) == txRegionSize)
	ds := txSlotSize - 8 // shm.Ring.SlotSize: the slot less its sequence word
	check("a MaxHeader hdr fits an eager slot", eagerFits(ds, MaxHeaderSize, 0))
	check("a MaxHeader hdr fits a bulk first frame", sOffBulkH+MaxHeaderSize <= ds)
	check("MaxHeader >= 128 (contract)", MaxHeaderSize >= 128)
	check("MaxPayload >= 1 GiB (contract)", MaxPayload >= 1<<30)
	check("bulk index, total 4- and 8-byte aligned", sOffBuf%4 == 0 && sOffTotal%8 == 0)
	// The views the code uses agree with the constants.
	fd, mem, err := createSealed("layout-test", txRegionSize)
	if err != nil {
		t.Fatal(err)
	}
	defer unmapClose(fd, mem)
	q, err := shm.InitRing(mem[txOffRing:txPoolOff], txSlots, txSlotSize)
	if err != nil {
		t.Fatal(err)
	}
	check("slot data size", q.SlotSize() == ds)
	if _, err := shm.InitPool(mem[txPoolOff:], txBufs, txBufSize); err != nil {
		t.Fatal(err)
	}
}
