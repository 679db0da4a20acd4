package tcp

import (
	"fmt"
	"hash/crc32"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/conduit"
)

// TestReadySetServesBufferedFrames: four ranks send rank 0 more small AMs
// than one Poll delivers from a connection (pollBudget), plus Mediums, all
// before rank 0 polls. Its first polls read the sockets empty; the rest of
// the frames then wait in the connections' buffers, where the kernel's ready
// set does not see them, and later polls must still deliver every one
// (readySet.want). Every AM's source, order and payload are checked.
func TestReadySetServesBufferedFrames(t *testing.T) {
	const shorts, mediums = 2*pollBudget + 7, 12
	var next [5]int32 // by source: the sequence number expected next
	var bad atomic.Int64
	trs := meshTransports(t, 5, func(r int, tr *Transport) conduit.Delivery {
		return func(in *conduit.Incoming) {
			if r != 0 || in.Src < 1 || in.Src > 4 || in.Args[0] != next[in.Src] || int(in.Args[1]) != len(in.Payload) ||
				crc32.ChecksumIEEE(in.Payload) != uint32(in.Args[2]) {
				bad.Add(1)
				return
			}
			next[in.Src]++
		}
	})
	if !trs[0].rs.on() {
		t.Fatal("rank 0 has four connections and no ready set")
	}
	for src := 1; src <= 4; src++ {
		payload := make([]byte, 3000)
		for i := range payload {
			payload[i] = byte(i*src + 1)
		}
		for i := range shorts + mediums {
			h := conduit.Header{Cat: conduit.Short, IsReq: true, Handler: 1, NArgs: 3}
			p := payload[:0]
			if i%(shorts/mediums) == 5 {
				h.Cat, p = conduit.Medium, payload[:100*i%len(payload)]
			}
			h.Args[0], h.Args[1], h.Args[2] = int32(i), int32(len(p)), int32(crc32.ChecksumIEEE(p))
			if err := trs[src].Send(0, h, p, 0); err != nil {
				t.Fatal(err)
			}
		}
		trs[src].Poll(false, trs[src].d) // writes what the batcher holds
	}
	want := int32(shorts + mediums)
	deadline := time.Now().Add(10 * time.Second)
	polls := 0
	for (next[1] < want || next[2] < want || next[3] < want || next[4] < want) && time.Now().Before(deadline) && bad.Load() == 0 {
		trs[0].Poll(false, trs[0].d)
		polls++
	}
	if next[1] != want || next[2] != want || next[3] != want || next[4] != want || bad.Load() != 0 {
		t.Fatalf("after %d polls: %v AMs delivered in order from ranks 1-4 (want %d each), %d out of order or wrong", polls, next[1:], want, bad.Load())
	}
	if polls < 3 {
		t.Fatalf("every AM arrived in %d polls: the test did not leave frames in a buffer", polls)
	}
}

// TestReadySetForgetsLostConnection: a connection whose peer closed (its end
// of stream is readable for ever) leaves the ready set once a poll finds it
// lost, so that later polls are not woken by it.
func TestReadySetForgetsLostConnection(t *testing.T) {
	trs := meshTransports(t, 5, func(int, *Transport) conduit.Delivery { return func(*conduit.Incoming) {} })
	tr := trs[0]
	trs[2].Close()
	idx := -1
	for i, l := range tr.links {
		if l.rank == 2 {
			idx = i
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !tr.links[idx].gone.Load() && time.Now().Before(deadline) {
		tr.Poll(false, tr.d)
	}
	if !tr.links[idx].gone.Load() {
		t.Fatal("rank 0 did not see rank 2's connection end")
	}
	tr.dmu.Lock()
	tr.rs.wait()
	hot := tr.rs.hot[idx]
	tr.dmu.Unlock()
	if hot {
		t.Fatal("the lost connection is still in the ready set")
	}
}

// BenchmarkPollEmptyLinks is BenchmarkPollEmpty for a rank with 1-8 quiet
// connections, through the ready set ("set", whatever readySetMin says) and
// with every socket read ("reads"): the per-poll cost the set saves
// (docs/tcp.md, "Many connections").
func BenchmarkPollEmptyLinks(b *testing.B) {
	eachLinkCount(b, func(b *testing.B, links int) {
		trs := meshTransports(b, links+1, func(int, *Transport) conduit.Delivery { return func(*conduit.Incoming) {} })
		tr := trs[0]
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if tr.Poll(false, tr.d) != 0 {
				b.Fatal("an AM arrived")
			}
		}
	})
}

// BenchmarkShortRoundTripLinks is BenchmarkShortRoundTrip between ranks 0
// and 1 of a job whose ranks each have 1-8 connections, the others quiet,
// both ways as BenchmarkPollEmptyLinks: what the set costs a frame's
// arrival, and from how many connections it pays (readySetMin).
func BenchmarkShortRoundTripLinks(b *testing.B) {
	eachLinkCount(b, func(b *testing.B, links int) { shortRoundTrip(b, links+1) })
}

// eachLinkCount runs bench as sub-benchmarks for 1-8 connections, each
// with the ready set ("set") and without ("reads").
func eachLinkCount(b *testing.B, bench func(b *testing.B, links int)) {
	for _, links := range []int{1, 2, 3, 4, 8} {
		for _, way := range []string{"set", "reads"} {
			b.Run(fmt.Sprintf("links=%d/%s", links, way), func(b *testing.B) {
				defer forceReadySet(way == "set", links)()
				bench(b, links)
			})
		}
	}
}

// forceReadySet sets readySetMin so that transports with links connections
// have a ready set (on) or not, and returns what restores it.
func forceReadySet(on bool, links int) func() {
	old := readySetMin
	readySetMin = links + 1
	if on {
		readySetMin = 1
	}
	return func() { readySetMin = old }
}

// TestReadySetNoAllocs: a Poll through the ready set, empty or delivering
// a Short, allocates nothing.
func TestReadySetNoAllocs(t *testing.T) {
	var got atomic.Int64
	trs := meshTransports(t, 5, func(int, *Transport) conduit.Delivery {
		return func(*conduit.Incoming) { got.Add(1) }
	})
	tr := trs[0]
	if !tr.rs.on() {
		t.Fatal("rank 0 has four connections and no ready set")
	}
	if a := testing.AllocsPerRun(1000, func() { tr.Poll(false, tr.d) }); a != 0 {
		t.Errorf("an empty Poll allocates %v times", a)
	}
	h := conduit.Header{Cat: conduit.Short, IsReq: true, Handler: 1}
	a := testing.AllocsPerRun(1000, func() {
		want := got.Load() + 1
		if err := trs[3].Send(0, h, nil, 0); err != nil {
			t.Fatal(err)
		}
		trs[3].Poll(false, trs[3].d) // writes it if it was batched
		for got.Load() < want {
			tr.Poll(false, tr.d)
		}
	})
	if a != 0 {
		t.Errorf("a Short sent and delivered through the ready set allocates %v times", a)
	}
}
