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
	check("ring fits before the pool", txOffRing+shm.MsgRingBytes(txSlots) == txPoolOff)
	check("fenced word in the page header, before the bell", bellOffFenced%4 == 0 && bellOffFenced >= 8 && bellOffFenced+4 <= bellOff)
	check("pool 64-byte aligned", txPoolOff%64 == 0)
	check("region holds the pool", txPoolOff+shm.PoolBytes(txBufs, txBufSize) == txRegionSize)
	ds := txEagerMax
	check("eager frames are whole slots less the message word", (ds+8)%shm.MsgSlotSize == 0)
	check("a MaxHeader hdr fits an eager frame", eagerFits(ds, MaxHeaderSize, 0))
	check("a Portals 8-byte put (80-byte hdr) takes two slots", shm.MsgSlots(sOffEager+80+8) == 2)
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
	q, err := shm.InitMsgRing(mem[txOffRing:txPoolOff], txSlots)
	if err != nil {
		t.Fatal(err)
	}
	check("an eager frame fits a message", q.MaxData() >= ds)
	check("ring size", q.Cap() == txSlots)
	if _, err := shm.InitPool(mem[txPoolOff:], txBufs, txBufSize); err != nil {
		t.Fatal(err)
	}
}
