package launch_test

import (
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/boot/bootwire"
)

// The server's side of a rank leaving early: FINALIZE is recorded and
// acknowledged; PEERLEFT goes to every connected rank that has not
// finalized, except the leaver; a rank that connects afterwards is told
// EXITNOW with the job's code; PROGRESS reports are kept per rank.
func TestServerFinalizeAndPeerLeft(t *testing.T) {
	srv := listen(t, 4)
	rs := admit(t, srv, 3, 4)
	if !srv.Joined(0) || !srv.Joined(2) || srv.Joined(3) || !srv.AnyJoined() {
		t.Errorf("Joined: %v %v %v, AnyJoined %v; want true true false, true", srv.Joined(0), srv.Joined(2), srv.Joined(3), srv.AnyJoined())
	}
	rs[2].send(&bootwire.Finalize{})
	if m, ok := rs[2].recv().(*bootwire.Finalized); !ok {
		t.Fatalf("FINALIZE answered %#v, want FINALIZED", m)
	}
	if !srv.Finalized(2) || srv.Finalized(0) {
		t.Errorf("Finalized(2) = %v, Finalized(0) = %v; want true, false", srv.Finalized(2), srv.Finalized(0))
	}
	rs[0].send(&bootwire.Progress{Count: 7, Msg: "Event.Wait for Barrier"})
	for deadline := time.Now().Add(10 * time.Second); srv.Progress()[0].Count != 7; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("PROGRESS not recorded: %+v", srv.Progress()[0])
		}
	}
	if p := srv.Progress()[0]; p.Waiting != "Event.Wait for Barrier" || !p.Joined || p.Finalized {
		t.Errorf("Progress()[0] = %+v", p)
	}

	told := srv.PeerLeft(1, 5, 300*time.Millisecond, "rank 1 left")
	if len(told) != 1 || told[0] != 0 {
		t.Errorf("PeerLeft told ranks %v, want [0] (not the leaver, not a finalized rank)", told)
	}
	want := bootwire.PeerLeft{Rank: 1, Code: 5, DelayMS: 300, Msg: "rank 1 left"}
	if m, ok := rs[0].recv().(*bootwire.PeerLeft); !ok || *m != want {
		t.Errorf("rank 0 got %#v, want %#v", m, want)
	}
	late := dialRaw(t, srv)
	late.send(hello(3, 4))
	if m, ok := late.recv().(*bootwire.ExitNow); !ok || m.Code != 5 {
		t.Errorf("a rank joining after PEERLEFT got %#v, want EXITNOW 5", m)
	}
}
