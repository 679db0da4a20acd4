// Command portalsring passes a greeting around a ring of processes with Portals 4.3:
// every rank appends a matching list entry, learns the job's physical IDs (JobMap), puts
// "hello from rank R" into its right neighbour's entry with a full ack, and waits for the
// PUT event of its left neighbour's message and the ACK of its own.
//
//	go run ./cmd/gexrun -n 3 ./examples/portalsring
package main

import (
	"fmt"
	"os"

	"github.com/gexgo/gexgo/portals"
)

func main() {
	check := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "portalsring:", err)
			os.Exit(1)
		}
	}
	check(portals.Init())
	defer portals.Fini()
	ni, _, err := portals.NIInit(portals.IfaceDefault, portals.NIMatching|portals.NILogical, portals.PIDAny, nil)
	check(err)
	eq, err := ni.EQAlloc(16)
	check(err)
	pt, err := ni.PTAlloc(0, eq, portals.PTAny)
	check(err)
	inbox := make([]byte, 64)
	_, err = ni.MEAppend(pt, &portals.ME{Buf: inbox, UID: portals.UIDAny, Options: portals.OpPut,
		MatchID: portals.RankID(portals.RankAny), MatchBits: 0x4e110}, portals.PriorityList, 0)
	check(err)
	check(eqKind(eq, portals.EventLink))

	m, err := portals.JobMap(ni) // collective: every rank has appended its entry after it
	check(err)
	check(ni.SetMap(m))
	me, err := ni.ID()
	check(err)
	right := portals.RankID((me.Rank + 1) % portals.Rank(len(m)))

	msg := []byte(fmt.Sprintf("hello from rank %d", me.Rank))
	md, err := ni.MDBind(portals.MD{Buf: msg, EQ: eq, Options: portals.MDEventSendDisable})
	check(err)
	check(portals.Put(md, 0, uint64(len(msg)), portals.AckReqFull, right, pt, 0x4e110, 0, 0, 0))
	for got := 0; got < 2; got++ { // our ACK and the neighbour's PUT, in either order
		ev, err := eq.Wait()
		check(err)
		switch ev.Type {
		case portals.EventPut:
			fmt.Printf("rank %d got %q from rank %d\n", me.Rank, ev.Start, ev.Initiator.Rank)
		case portals.EventAck:
			if ev.NIFail != portals.NIOK {
				check(fmt.Errorf("put failed: %v", ev.NIFail))
			}
		}
	}
	check(md.Release())
	check(ni.Fini())
}

func eqKind(eq portals.EQHandle, k portals.EventKind) error {
	ev, err := eq.Wait()
	if err == nil && ev.Type != k {
		err = fmt.Errorf("event %v, want %v", ev.Type, k)
	}
	return err
}
