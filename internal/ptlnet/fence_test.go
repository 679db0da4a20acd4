package ptlnet

import (
	"testing"

	"github.com/gexgo/gexgo/internal/shm"
)

// TestFenceChoice: a connection commits into its ring with a release store
// only where both sides use the asymmetric fence (shm.MsgRing.SetReleaseCommit,
// the fenced word of the doorbell page): between two Nets of this process
// exactly when the fence is available here, and never toward a peer process
// started without it (GEXGO_NO_MEMBARRIER=1), whose round trips still
// complete (its commits to us are sequentially consistent).
func TestFenceChoice(t *testing.T) {
	c := newCollector()
	a := open(t, PIDAny, func(Peer, []byte, []byte) {})
	b := open(t, PIDAny, c.handle)
	if err := a.Send(b.ID(), []byte("h"), []byte("p")); err != nil {
		t.Fatal(err)
	}
	c.wait(t, 1)
	sc := (*a.routes.Load())[b.ID()].(*shmConn)
	if got, want := sc.tx.ReleaseCommit(), shm.EnableHeavyFence(); got != want {
		t.Errorf("same process: release commit %v, want %v (fence available)", got, want)
	}
	if got := shm.Uint32At(a.bellMem, bellOffFenced).Load() == bellFencedYes; got != shm.EnableHeavyFence() {
		t.Errorf("doorbell page says fenced %v, want %v", got, shm.EnableHeavyFence())
	}

	pong := newCollector()
	n := open(t, PIDAny, pong.handle)
	h := startHelper(t, "echo", -1, shm.EnvNoMembarrier+"=1")
	for i := 0; i < 100; i++ {
		if err := n.Send(h.id, []byte("ping"), []byte("12345678")); err != nil {
			t.Fatal(err)
		}
		if m := pong.wait(t, i+1); string(m[i].payload) != "12345678" {
			t.Fatalf("echo %d: %q", i, m[i].payload)
		}
	}
	hc := (*n.routes.Load())[h.id].(*shmConn)
	if hc.tx.ReleaseCommit() {
		t.Error("release commit toward a peer without the fence")
	}
}
