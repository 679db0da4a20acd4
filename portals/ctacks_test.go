package portals

import (
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/ptlnet"
)

// TestCoalescedCTAcks: counting acks (PTL_CT_ACK_REQ) of one Batch run are sent as one
// opCTAcks message per MD (nic.go, ctAckRun); the initiator's counter must still rise by
// exactly what the acks one by one would add (§3.15.1: successes 1 each, or their bytes with
// PTL_MD_EVENT_CT_BYTES; failures 1 each), a full PTL_EVENT_ACK sent after them in the run
// must find them all counted (per-pair order), and the counted acks after it must arrive too.
// The run is driven on the target's NIC directly (Batch.Begin, Handle, End) with put
// headers from the initiator, so the batching does not depend on timing.
func TestCoalescedCTAcks(t *testing.T) {
	for _, bytes := range []bool{false, true} {
		name := "count"
		if bytes {
			name = "bytes"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, niKinds[1], 2, nil)
			pt := must(e.ni[1].PTAlloc(0, EQNone, PTAny))
			e.appendEntry(1, pt, anyME(make([]byte, 64), EventLinkDisable), PriorityList, 0)
			qI := must(e.ni[0].EQAlloc(16))
			cA, cB := must(e.ni[0].CTAlloc()), must(e.ni[0].CTAlloc())
			opts := MDEventCTAck | MDEventSendDisable
			if bytes {
				opts |= MDEventCTBytes
			}
			mdA := must(e.ni[0].MDBind(MD{Buf: make([]byte, 8), EQ: qI, CT: cA, Options: opts}))
			mdB := must(e.ni[0].MDBind(MD{Buf: make([]byte, 8), EQ: qI, CT: cB, Options: opts}))

			ini, pI, _ := lockNI(e.ni[0], "test")
			src := ptlnet.Peer{ID: pI.self, UID: uint32(pI.uid)}
			pI.mu.Unlock()
			_, pT, _ := lockNI(e.ni[1], "test")
			pT.mu.Unlock()

			payload := make([]byte, 5)
			put := func(md MDHandle, ack AckReq, pt PTIndex, userPtr uint64) {
				h := make(wireHdr, hdrLen)
				h.request(opPut, ini.idx, ack, 0, 0, pt, 0, 0, 5, md, userPtr, 0, 0)
				pT.handleLocked(src, h, payload)
			}
			const n, nFail, nB, nAfter = 100, 7, 3, 20
			pT.batchBegin()
			for i := 0; i < n; i++ {
				put(mdA, CTAckReq, pt, 0)
				if i%10 == 9 && i/10 < nB {
					put(mdB, CTAckReq, pt, 0) // another MD: the run is split
				}
			}
			for i := 0; i < nFail; i++ {
				put(mdA, CTAckReq, pt+1, 0) // no such PT: PTL_NI_DROPPED, counted as failure
			}
			put(mdA, AckReqFull, pt, 77) // a full ack: the counted acks before it go first
			for i := 0; i < nAfter; i++ {
				put(mdA, CTAckReq, pt, 0)
			}
			if pT.ctAcks.n() != nAfter {
				t.Fatalf("pending coalesced acks %d, want %d", pT.ctAcks.n(), nAfter)
			}
			pT.batchEnd()
			if pT.ctAcks.n() != 0 {
				t.Fatal("coalesced acks left after the run")
			}

			ev := expectKind(t, qI, EventAck)
			if ev.UserPtr != 77 || ev.NIFail != NIOK || ev.MLength != 5 {
				t.Fatalf("full ack %+v", ev)
			}
			per := uint64(1)
			if bytes {
				per = 5
			}
			if v := must(cA.Get()); v.Success < n*per || v.Failure != nFail {
				t.Fatalf("at the full ack, counter %+v; want ≥ %d successes and %d failures before it", v, n*per, nFail)
			}
			// Not ctWait: with failures counted, PtlCTPoll returns at once
			// (§3.14.7), before the acks after the full one may have arrived.
			want := CTEvent{Success: (n + 1 + nAfter) * per, Failure: nFail}
			if v := ctSuccessWait(t, cA, want.Success); v != want {
				t.Fatalf("counter %+v, want %+v", v, want)
			}
			if v := ctWait(t, cB, nB*per); v != (CTEvent{Success: nB * per}) {
				t.Fatalf("second MD's counter %+v, want %d", v, nB*per)
			}
			expectEmpty(t, qI) // counting acks post no events
			if v := must(e.ni[0].Status(SRDropCount)); v != 0 {
				t.Fatalf("initiator drop count %d", v)
			}
		})
	}
}

// ctSuccessWait polls c until its success field reaches n (whatever its
// failure field says) or 20 s have passed, and returns its value then.
func ctSuccessWait(t *testing.T, c CTHandle, n uint64) CTEvent {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := must(c.Get())
		if v.Success >= n || time.Now().After(deadline) {
			return v
		}
		time.Sleep(100 * time.Microsecond)
	}
}
