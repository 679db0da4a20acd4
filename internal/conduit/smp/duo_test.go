package smp_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/conduit/loop"
	"github.com/gexgo/gexgo/internal/conduit/smp"
)

// newJob starts an in-process job of n ranks and returns their conduits.
func newJob(t testing.TB, n int) []*smp.Conduit { return newJobCfg(t, loop.Config{Size: n, CPUs: n}) }

func newJobCfg(t testing.TB, cfg loop.Config) []*smp.Conduit {
	t.Helper()
	n := cfg.Size
	j, err := loop.NewJob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]*smp.Conduit, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[r], errs[r] = j.Conduit(r)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

// got is one delivered AM, copied.
type got struct {
	src     int
	h       conduit.Header
	payload []byte
}

func record(into *[]got) conduit.Delivery {
	return func(in *conduit.Incoming) {
		*into = append(*into, got{in.Src, in.Header, bytes.Clone(in.Payload)})
	}
}

// TestDuoRoundTrip follows requests and their replies through the duo line
// of ranks 0 and 1: the request lands in the line (not a ring), the reply
// is written over it, the delivered reply is not delivered again, and the
// next request is written over that; what does not fit, or finds the line
// taken, takes the rings.
func TestDuoRoundTrip(t *testing.T) {
	cs := newJob(t, 2)
	c0, c1 := cs[0], cs[1]
	if p := smp.DuoPeers(c0); len(p) != 1 || p[0] != 1 {
		t.Fatalf("rank 0's duo peers %v, want [1]", p)
	}
	var reqs, reps []got
	pay := []byte("sixteen bytes!!!")
	other := []byte("0123456789abcdef")
	reply := func(in *conduit.Incoming) { // the request handler: record, reply with args+1
		reqs = append(reqs, got{in.Src, in.Header, bytes.Clone(in.Payload)})
		if in.Cat == conduit.Medium {
			rp := in.Payload
			if in.Args[0] == 40 {
				rp = other
			}
			if err := c1.SendMedium(in.Src, false, 9, 0, 0, []int32{in.Args[0] + 1}, rp, 0); err != nil {
				t.Errorf("reply: %v", err)
			}
			if in.Args[0] == 40 {
				// The reply was written over the request in the line; the
				// handler's payload must not have changed. A request sent
				// now finds the line holding an undelivered reply: it takes
				// the rings.
				if !bytes.Equal(in.Payload, pay) {
					t.Errorf("the handler's payload changed to %q when its reply was written over the request", in.Payload)
				}
				if err := c0.SendMedium(1, true, 5, 0, 0, []int32{50}, other, 0); err != nil {
					t.Errorf("request from the handler: %v", err)
				}
				if w := smp.DuoWord(c0, 1); smp.IsRequest(w) {
					t.Error("a request was written over an undelivered reply")
				}
			}
			return
		}
		if in.NArgs > 0 {
			if err := c1.SendShort(in.Src, false, 9, 0, 0, []int32{in.Args[0] + 1}, 0); err != nil {
				t.Errorf("reply: %v", err)
			}
		}
	}
	c1.SetDelivery(reply)
	c0.SetDelivery(record(&reps))

	args := []int32{7, -2, 3, 4, 5, 6, 7, 8} // the most a duo line holds
	if err := c0.SendShort(1, true, 5, 1, 2, args, 0); err != nil {
		t.Fatal(err)
	}
	if w := smp.DuoWord(c0, 1); !smp.IsRequest(w) {
		t.Fatalf("after the request: line word %#x; want the request", w)
	}
	if !smp.RingsEmpty(c1) {
		t.Fatal("the request went into rank 1's rings, not the duo line")
	}
	before := c1.RecvTraffic()
	if n := c1.Poll(false); n != 1 || len(reqs) != 1 {
		t.Fatalf("rank 1 polled %d AMs (%d requests), want 1", n, len(reqs))
	}
	if c1.RecvTraffic() == before {
		t.Fatal("RecvTraffic did not count the request from the duo line (the launcher's hang watch reads it)")
	}
	r := reqs[0]
	if r.src != 0 || r.h.Cat != conduit.Short || !r.h.IsReq || r.h.Handler != 5 || r.h.EP != 1 || r.h.SrcEP != 2 || int(r.h.NArgs) != len(args) {
		t.Fatalf("request delivered as %+v", r)
	}
	for i, a := range args {
		if r.h.Args[i] != a {
			t.Fatalf("request arg %d = %d, want %d", i, r.h.Args[i], a)
		}
	}
	if w := smp.DuoWord(c0, 1); w == 0 || smp.IsRequest(w) {
		t.Fatalf("after the reply: line word %#x; want the reply written over the request", w)
	}
	if !smp.RingsEmpty(c0) {
		t.Fatal("the reply went into rank 0's rings, not the duo line")
	}
	if n := c0.Poll(false); n != 1 || len(reps) != 1 || reps[0].h.IsReq || reps[0].h.Args[0] != 8 || reps[0].src != 1 {
		t.Fatalf("rank 0 polled %d AMs: %+v; want the reply with arg 8", n, reps)
	}
	if n := c0.Poll(false); n != 0 || len(reps) != 1 {
		t.Fatalf("a second poll delivered %d more AMs: the reply was delivered twice", n)
	}
	if w := smp.DuoWord(c0, 1); w == 0 || smp.IsRequest(w) {
		t.Fatal("the delivered reply was cleared by its consumer; the next request is written over it")
	}

	// A Medium of 16 bytes with an arg fits; it is written over the
	// delivered reply.
	if err := c0.SendMedium(1, true, 5, 0, 0, []int32{40}, pay, 0); err != nil {
		t.Fatal(err)
	}
	if w := smp.DuoWord(c0, 1); !smp.IsRequest(w) {
		t.Fatalf("after the second request: line word %#x; want the request", w)
	}
	c1.Poll(false) // request 40, whose handler also sends request 50 (rings)
	c0.Poll(false)
	c1.Poll(false) // request 50
	c0.Poll(false)
	if len(reqs) != 3 || !bytes.Equal(reqs[1].payload, pay) || reqs[1].h.Cat != conduit.Medium || !bytes.Equal(reqs[2].payload, other) {
		t.Fatalf("Medium requests delivered as %+v", reqs[1:])
	}
	if len(reps) != 3 || !bytes.Equal(reps[1].payload, other) || reps[1].h.Args[0] != 41 || !bytes.Equal(reps[2].payload, other) || reps[2].h.Args[0] != 51 {
		t.Fatalf("Medium replies delivered as %+v", reps[1:])
	}

	// A request without a reply: the line is emptied after the handler.
	if err := c0.SendShort(1, true, 6, 0, 0, nil, 0); err != nil {
		t.Fatal(err)
	}
	c1.Poll(false)
	if w := smp.DuoWord(c0, 1); w != 0 || len(reqs) != 4 {
		t.Fatalf("after a request without reply: line word %#x, %d requests delivered", w, len(reqs))
	}

	// What does not fit takes the rings: 9 args, a Medium of 49 bytes with
	// an arg, and the reply to a request the rings brought.
	if err := c0.SendShort(1, true, 5, 0, 0, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 0); err != nil {
		t.Fatal(err)
	}
	if w := smp.DuoWord(c0, 1); w != 0 || smp.RingsEmpty(c1) {
		t.Fatal("a Short of 9 args went into the duo line")
	}
	c1.Poll(false)
	if w := smp.DuoWord(c0, 1); w != 0 || smp.RingsEmpty(c0) {
		t.Fatalf("the reply to a ring request did not take the rings (line word %#x)", w)
	}
	c0.Poll(false)
	if err := c0.SendMedium(1, true, 5, 0, 0, []int32{1}, make([]byte, 49), 0); err != nil {
		t.Fatal(err)
	}
	if w := smp.DuoWord(c0, 1); w != 0 {
		t.Fatal("a 49-byte Medium with an arg went into the duo line")
	}
	c1.Poll(false)
	c0.Poll(false)
	if len(reqs) != 6 || len(reps) != 5 {
		t.Fatalf("%d requests and %d replies delivered, want 6 and 5", len(reqs), len(reps))
	}
}

// TestDuoBusyFallsBack sends a second request while the first is in the
// duo line: it takes the ring, and both arrive once.
func TestDuoBusyFallsBack(t *testing.T) {
	cs := newJob(t, 2)
	var reqs []got
	cs[1].SetDelivery(record(&reqs))
	cs[0].SetDelivery(func(*conduit.Incoming) {})
	for i := range int32(3) {
		if err := cs[0].SendShort(1, true, 1, 0, 0, []int32{i}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if smp.RingsEmpty(cs[1]) {
		t.Fatal("requests 2 and 3 found the duo line taken but are not in the rings")
	}
	cs[1].Poll(false)
	seen := map[int32]int{}
	for _, r := range reqs {
		seen[r.h.Args[0]]++
	}
	if len(reqs) != 3 || seen[0] != 1 || seen[1] != 1 || seen[2] != 1 {
		t.Fatalf("delivered %v (%d AMs), want args 0, 1, 2 once each", seen, len(reqs))
	}
}

// TestDuoClaim holds the line's claim, as a request sender of the same
// process between its claim and its commit would: another request must
// not write the line, and takes the ring.
func TestDuoClaim(t *testing.T) {
	cs := newJob(t, 2)
	var reqs []got
	cs[1].SetDelivery(record(&reqs))
	release := smp.HoldAskClaim(cs[0], 1)
	if err := cs[0].SendShort(1, true, 1, 0, 0, []int32{1}, 0); err != nil {
		t.Fatal(err)
	}
	if w := smp.DuoWord(cs[0], 1); w != 0 || smp.RingsEmpty(cs[1]) {
		t.Fatalf("a request wrote the line while another sender held it (word %#x)", w)
	}
	release()
	if err := cs[0].SendShort(1, true, 1, 0, 0, []int32{2}, 0); err != nil {
		t.Fatal(err)
	}
	if w := smp.DuoWord(cs[0], 1); !smp.IsRequest(w) {
		t.Fatal("after the claim was released, a request did not take the line")
	}
	if cs[1].Poll(false); len(reqs) != 2 {
		t.Fatalf("%d requests delivered, want 2", len(reqs))
	}
}

// TestDuoMalformed has rank 0 write request words into its duo line that
// no sender encodes: rank 1 drops each with a complaint, delivers nothing,
// empties the line, and the line works again afterwards. A word that is
// not a request is not rank 1's to take.
func TestDuoMalformed(t *testing.T) {
	cs := newJob(t, 2)
	var reqs []got
	cs[1].SetDelivery(record(&reqs))
	junk := bytes.Repeat([]byte{0xff}, 24)
	for _, w := range []uint64{
		0xff,                                    // unknown kind bits
		uint64(conduit.Long) | 4,                // a Long
		uint64(conduit.Short) | 4 | 1<<24,       // a Short with payload
		uint64(conduit.Medium) | 4 | 8 | 49<<24, // 49 payload bytes
		uint64(conduit.Medium) | 4 | 8 | 3<<16 | 33<<24, // 3 args and 33 bytes
		uint64(conduit.Short) | 4 | 9<<16,               // 9 args
		uint64(conduit.Medium) | 4 | 255<<24,            // not inline
	} {
		smp.WriteDuoAsk(cs[0], 1, w, junk)
		if n := cs[1].Poll(false); n != 0 || len(reqs) != 0 {
			t.Fatalf("word %#x: %d AMs delivered", w, n)
		}
		if smp.DuoWord(cs[0], 1) != 0 {
			t.Fatalf("word %#x: the line was not emptied", w)
		}
	}
	smp.WriteDuoAsk(cs[0], 1, uint64(conduit.Short), junk) // a reply's kind
	if n := cs[1].Poll(false); n != 0 || smp.DuoWord(cs[0], 1) == 0 {
		t.Fatalf("a reply-kind word in the line was taken by the answerer (%d AMs)", n)
	}
	smp.WriteDuoAsk(cs[0], 1, 0, nil)
	if err := cs[0].SendShort(1, true, 1, 0, 0, []int32{5}, 0); err != nil {
		t.Fatal(err)
	}
	if cs[1].Poll(false); len(reqs) != 1 || reqs[0].h.Args[0] != 5 {
		t.Fatalf("after the junk, a request was delivered as %+v", reqs)
	}
}

// TestDuoSleepWake has rank 1 sleep on its doorbell while a request waits
// in the duo line (Sleep must see it and not wait), then with nothing to
// do (a request through the duo line must wake it), each time long before
// the sleep's 60 s timeout.
func TestDuoSleepWake(t *testing.T) {
	cs := newJob(t, 2)
	var delivered atomic.Int32
	cs[1].SetDelivery(func(*conduit.Incoming) { delivered.Add(1) })
	if err := cs[0].SendShort(1, true, 1, 0, 0, nil, 0); err != nil {
		t.Fatal(err)
	}
	slept := make(chan struct{})
	go func() {
		defer close(slept)
		cs[1].Sleep(60 * time.Second)
	}()
	select {
	case <-slept:
	case <-time.After(20 * time.Second):
		t.Fatal("rank 1 went to sleep with a request waiting in the duo line")
	}
	if cs[1].Poll(false); delivered.Load() != 1 {
		t.Fatalf("%d requests delivered, want 1", delivered.Load())
	}
	delivered.Store(0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for delivered.Load() == 0 {
			cs[1].Sleep(60 * time.Second)
			cs[1].Poll(false)
		}
	}()
	time.Sleep(20 * time.Millisecond) // let it go to sleep
	if err := cs[0].SendShort(1, true, 1, 0, 0, nil, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("rank 1 slept through a request in the duo line")
	}
}

// TestDuoConcurrent runs requests and replies both ways at once between two
// ranks, from several goroutines per rank, in sizes that take the duo
// lines and sizes that do not: every request and every reply must arrive
// exactly once, with its args and payload intact.
func TestDuoConcurrent(t *testing.T) {
	const senders, per = 3, 3000
	cs := newJob(t, 2)
	type tally struct {
		mu   sync.Mutex
		reqs map[int64]int
		reps map[int64]int
		bad  []string
	}
	tallies := [2]*tally{{reqs: map[int64]int{}, reps: map[int64]int{}}, {reqs: map[int64]int{}, reps: map[int64]int{}}}
	payloadFor := func(id int64, n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(id*31 + int64(i))
		}
		return p
	}
	for r, c := range cs {
		tl := tallies[r]
		check := func(in *conduit.Incoming, id int64) {
			if in.Cat == conduit.Medium && !bytes.Equal(in.Payload, payloadFor(id, len(in.Payload))) {
				tl.mu.Lock()
				tl.bad = append(tl.bad, fmt.Sprintf("AM %d from rank %d: payload corrupted", id, in.Src))
				tl.mu.Unlock()
			}
		}
		c.SetDelivery(func(in *conduit.Incoming) {
			id := int64(in.Args[0])<<32 | int64(uint32(in.Args[1]))
			check(in, id)
			tl.mu.Lock()
			if in.IsReq {
				tl.reqs[id]++
			} else {
				tl.reps[id]++
			}
			tl.mu.Unlock()
			if !in.IsReq {
				return
			}
			var err error
			if in.Cat == conduit.Medium {
				err = c.SendMedium(in.Src, false, 2, 0, 0, []int32{in.Args[0], in.Args[1]}, in.Payload, 0)
			} else {
				err = c.SendShort(in.Src, false, 2, 0, 0, []int32{in.Args[0], in.Args[1]}, 0)
			}
			if err != nil {
				tl.mu.Lock()
				tl.bad = append(tl.bad, err.Error())
				tl.mu.Unlock()
			}
			// The payload stays the handler's after its reply went: let
			// the senders run, then look again.
			runtime.Gosched()
			check(in, id)
		})
	}
	var wg sync.WaitGroup
	var sent atomic.Int64
	for r, c := range cs {
		for s := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					id := int64(r*senders+s)<<32 | int64(i)
					var err error
					switch i % 4 {
					case 0:
						err = c.SendShort(1-r, true, 1, 0, 0, []int32{int32(id >> 32), int32(id)}, 0)
					case 1:
						err = c.SendMedium(1-r, true, 1, 0, 0, []int32{int32(id >> 32), int32(id)}, payloadFor(id, i%17), 0)
					case 2:
						err = c.SendMedium(1-r, true, 1, 0, 0, []int32{int32(id >> 32), int32(id)}, payloadFor(id, 40), 0)
					default:
						err = c.SendShort(1-r, true, 1, 0, 0, []int32{int32(id >> 32), int32(id), 3, 4, 5, 6, 7}, 0)
					}
					if err != nil {
						t.Error(err)
						return
					}
					sent.Add(1)
					c.Poll(false)
				}
			}()
		}
	}
	// Pollers until every reply is in.
	want := int64(2 * senders * per)
	stop := make(chan struct{})
	var pw sync.WaitGroup
	for _, c := range cs {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for {
				select {
				case <-stop:
					return
				default:
					c.Poll(false)
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n := int64(0)
		for _, tl := range tallies {
			tl.mu.Lock()
			n += int64(len(tl.reps))
			tl.mu.Unlock()
		}
		if n == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	pw.Wait()
	for r, tl := range tallies {
		for _, b := range tl.bad {
			t.Error(b)
		}
		if len(tl.reqs) != senders*per || len(tl.reps) != senders*per {
			t.Fatalf("rank %d: %d distinct requests and %d distinct replies delivered, want %d each", r, len(tl.reqs), len(tl.reps), senders*per)
		}
		for id, n := range tl.reqs {
			if n != 1 {
				t.Fatalf("rank %d: request %d delivered %d times", r, id, n)
			}
		}
		for id, n := range tl.reps {
			if n != 1 {
				t.Fatalf("rank %d: reply %d delivered %d times", r, id, n)
			}
		}
	}
}

// TestDuoLong sends a Long placed in the peer's segment and its Long reply
// through the duo line: the destination address, length and args arrive,
// the payload is where the sender put it; a Long whose destination is
// outside the receiver's segment (a peer ignoring the protocol) is dropped.
func TestDuoLong(t *testing.T) {
	cs := newJob(t, 2)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.AttachSegment(1 << 16); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	c0, c1 := cs[0], cs[1]
	var reqs, reps []got
	c1.SetDelivery(func(in *conduit.Incoming) {
		reqs = append(reqs, got{in.Src, in.Header, bytes.Clone(in.Payload)})
		if !in.Placed {
			t.Error("a Long from the duo line arrived unplaced")
		}
		dest := c1.Segment(0).Owner + 256
		if err := c1.SendLong(0, false, 9, 0, []int32{in.Args[3]}, in.Payload, c1.LongView(0, dest, len(in.Payload)), dest, 0); err != nil {
			t.Error(err)
		}
	})
	c0.SetDelivery(record(&reps))
	pay := []byte("a Long payload of 29 bytes...")
	dest := c0.Segment(1).Owner + 128
	if err := c0.SendLong(1, true, 5, 0, []int32{1, 2, 3, 4}, pay, c0.LongView(1, dest, len(pay)), dest, 0); err != nil {
		t.Fatal(err)
	}
	if w := smp.DuoWord(c0, 1); !smp.IsRequest(w) || !smp.RingsEmpty(c1) {
		t.Fatalf("a Long with 4 args did not take the duo line (word %#x)", w)
	}
	c1.Poll(false)
	if len(reqs) != 1 || reqs[0].h.Cat != conduit.Long || reqs[0].h.Dest != dest || !bytes.Equal(reqs[0].payload, pay) || reqs[0].h.Args[3] != 4 || reqs[0].h.NArgs != 4 {
		t.Fatalf("Long request delivered as %+v", reqs)
	}
	if w := smp.DuoWord(c0, 1); w == 0 || smp.IsRequest(w) || !smp.RingsEmpty(c0) {
		t.Fatalf("the Long reply did not take the line (word %#x)", w)
	}
	c0.Poll(false)
	if len(reps) != 1 || reps[0].h.Cat != conduit.Long || reps[0].h.Dest != c1.Segment(0).Owner+256 || !bytes.Equal(reps[0].payload, pay) || reps[0].h.Args[0] != 4 {
		t.Fatalf("Long reply delivered as %+v", reps)
	}
	if got := c0.Segment(0).Local[256 : 256+len(pay)]; !bytes.Equal(got, pay) {
		t.Fatalf("rank 0's segment holds %q where the reply's payload belongs", got)
	}

	// A Long whose bytes would lie past the receiver's segment (written
	// over the delivered reply).
	var line [24]byte
	binary.LittleEndian.PutUint64(line[:], c0.Segment(1).Owner+1<<16-4)
	smp.WriteDuoAsk(c0, 1, uint64(conduit.Long)|4|16|8<<24, line[:])
	if n := c1.Poll(false); n != 0 || len(reqs) != 1 {
		t.Fatalf("a Long outside the segment was delivered (%d AMs)", n)
	}
	if smp.DuoWord(c0, 1) != 0 {
		t.Fatal("the dropped Long's line was not emptied")
	}
}

// BenchmarkRoundTripOneThread measures the software of an AM round trip
// between two ranks of an in-process job driven by one goroutine (send the
// request, poll rank 1, whose handler replies, poll rank 0): no line moves
// between cores, so it is the path's instructions alone, through the duo
// line and through the rings.
func BenchmarkRoundTripOneThread(b *testing.B) {
	for _, noDuo := range []bool{false, true} {
		name := "duo"
		if noDuo {
			name = "rings"
		}
		for _, size := range []int{0, 8} {
			b.Run(fmt.Sprintf("%s/medium=%d", name, size), func(b *testing.B) {
				cs := newJobCfg(b, loop.Config{Size: 2, NoDuo: noDuo, CPUs: 2})
				c0, c1 := cs[0], cs[1]
				payload := make([]byte, size)
				replies := 0
				c1.SetDelivery(func(in *conduit.Incoming) {
					if in.Cat == conduit.Medium {
						c1.SendMedium(in.Src, false, 2, 0, 0, nil, in.Payload, 0)
					} else {
						c1.SendShort(in.Src, false, 2, 0, 0, nil, 0)
					}
				})
				c0.SetDelivery(func(*conduit.Incoming) { replies++ })
				b.ReportAllocs()
				for b.Loop() {
					if size == 0 {
						c0.SendShort(1, true, 1, 0, 0, nil, 0)
					} else {
						c0.SendMedium(1, true, 1, 0, 0, nil, payload, 0)
					}
					c1.Poll(false)
					c0.Poll(false)
				}
				if replies != b.N {
					b.Fatalf("%d replies for %d requests", replies, b.N)
				}
			})
		}
	}
}

// TestDuoMixed runs a job where rank 0 sends through duo lines and rank 1
// does not (GEX_SMP_NO_DUO on one rank only): rank 1 must still take rank
// 0's requests from the line (rank 0's region header says it sends there),
// and its own requests take the rings; round trips work both ways.
func TestDuoMixed(t *testing.T) {
	cs := newJobCfg(t, loop.Config{Size: 2, CPUs: 2, NoDuoFor: []bool{false, true}})
	if len(smp.DuoPeers(cs[0])) != 1 || len(smp.DuoPeers(cs[1])) != 0 {
		t.Fatalf("duo peers %v and %v, want [1] and []", smp.DuoPeers(cs[0]), smp.DuoPeers(cs[1]))
	}
	var got [2][]int32
	for r, c := range cs {
		c.SetDelivery(func(in *conduit.Incoming) {
			if in.IsReq {
				if err := c.SendShort(in.Src, false, 2, 0, 0, []int32{in.Args[0] + 1}, 0); err != nil {
					t.Errorf("rank %d reply: %v", r, err)
				}
				return
			}
			got[r] = append(got[r], in.Args[0])
		})
	}
	for i := range int32(5) {
		if err := cs[0].SendShort(1, true, 1, 0, 0, []int32{10 * i}, 0); err != nil {
			t.Fatal(err)
		}
		if w := smp.DuoWord(cs[0], 1); !smp.IsRequest(w) {
			t.Fatalf("rank 0's request %d did not take its duo line", i)
		}
		if err := cs[1].SendShort(0, true, 1, 0, 0, []int32{100 * i}, 0); err != nil {
			t.Fatal(err)
		}
		if smp.DuoWord(cs[1], 0) != 0 {
			t.Fatalf("rank 1 (no duo lines) wrote its line")
		}
		for range 2 {
			cs[1].Poll(false)
			cs[0].Poll(false)
		}
	}
	if len(got[0]) != 5 || len(got[1]) != 5 {
		t.Fatalf("replies delivered: rank 0 %v, rank 1 %v; want 5 each", got[0], got[1])
	}
}

// TestDuoSendsRule pins when a rank sends through duo lines: with another
// rank on the machine, at most duoMaxPeers+1 ranks there, and no more
// ranks than CPUs, unless turned off.
func TestDuoSendsRule(t *testing.T) {
	for _, c := range []struct {
		noDuo       bool
		local, cpus int
		want        bool
	}{
		{false, 2, 2, true}, {false, 1, 2, false}, {false, 4, 2, false}, {false, 4, 4, true},
		{false, 8, 64, true}, {false, 9, 64, false}, {true, 2, 2, false},
	} {
		if got := smp.DuoSends(c.noDuo, c.local, c.cpus); got != c.want {
			t.Errorf("duoSends(noDuo %v, %d ranks, %d CPUs) = %v, want %v", c.noDuo, c.local, c.cpus, got, c.want)
		}
	}
}
