package tcp

import (
	"bytes"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/conduit"
)

// TestDirectLongStream: a stream of large Longs (a put across hosts) is read
// from the socket straight into the segment, the Long after a direct one
// too: at most a frame header of it passes through the receive buffer. The
// frames after them (a Short, a small Long copied from the buffer) arrive
// intact and in order, every payload placed at its destination.
func TestDirectLongStream(t *testing.T) {
	aborts := make(chan string, 1)
	tr, b := connectedTransport(t, Config{MaxPayload: 1 << 16, MaxLong: 4 << 20}, aborts)
	defer tr.Close()
	seg := make([]byte, 4<<20)
	tr.place = func(dest uint64, n int) []byte {
		if dest > uint64(len(seg)) || uint64(n) > uint64(len(seg))-dest {
			return nil
		}
		return seg[dest : dest+uint64(n)]
	}

	type sent struct {
		h conduit.Header
		p []byte
	}
	fill := func(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }
	frames := []sent{
		{conduit.Header{Cat: conduit.Long, IsReq: true, Handler: 200, NArgs: 3, Dest: 0}, fill(1<<20, 0xA1)},
		{conduit.Header{Cat: conduit.Long, IsReq: true, Handler: 201, NArgs: 3, Dest: 1 << 20}, fill(1<<20, 0xB2)},
		{conduit.Header{Cat: conduit.Short, IsReq: true, Handler: 202, NArgs: 1}, nil},
		{conduit.Header{Cat: conduit.Long, IsReq: true, Handler: 203, NArgs: 2, Dest: 3 << 20}, fill(4<<10+3, 0xC3)},
	}
	frames[2].h.Args[0] = 77
	var stream []byte
	for i := range frames {
		stream = appendAM(stream, &frames[i].h, frames[i].p)
	}
	go b.Write(stream) // blocks until the transport has read most of it

	var got []conduit.Incoming
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < len(frames) {
		tr.Poll(false, func(in *conduit.Incoming) {
			c := *in
			if !bytes.Equal(in.Payload, frames[len(got)].p) {
				t.Errorf("AM %d (handler %d): payload of %d bytes differs from the %d sent", len(got), in.Handler, len(in.Payload), len(frames[len(got)].p))
			}
			got = append(got, c)
		})
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d AMs arrived", len(got), len(frames))
		}
		select {
		case msg := <-aborts:
			t.Fatalf("the job ended: %s", msg)
		default:
		}
	}
	for i, in := range got {
		f := frames[i]
		if in.Handler != f.h.Handler || in.Cat != f.h.Cat || in.NArgs != f.h.NArgs || in.Args != f.h.Args {
			t.Errorf("AM %d: header %+v, sent %+v", i, in.Header, f.h)
		}
		if f.h.Cat != conduit.Long {
			continue
		}
		if !in.Placed {
			t.Errorf("AM %d: a Long into the segment arrived unplaced", i)
		}
		if !bytes.Equal(seg[f.h.Dest:f.h.Dest+uint64(len(f.p))], f.p) {
			t.Errorf("AM %d: the segment at %d does not hold the payload", i, f.h.Dest)
		}
	}
	// The second Long's bytes (0xB2) went from the socket into the segment:
	// only the header read after the first Long may have staged a few.
	l := tr.peers[0]
	if n := bytes.Count(l.buf, []byte{0xB2}); n > frameMaxHead {
		t.Errorf("%d bytes of the Long after a direct Long passed through the receive buffer (at most a frame header, %d, may)", n, frameMaxHead)
	}
}

// stalledLong sets up a transport whose peer has written the first half of a
// 1 MiB Long into the segment and stopped (more than longSleepMin still to
// come), polls until that half has been read, and returns the transport, the
// peer's end, the rest of the stream, and the deliveries so far.
func stalledLong(t *testing.T, aborts chan string) (tr *Transport, rest []byte, peer interface{ Write([]byte) (int, error) }, seg, payload []byte, h conduit.Header, got *[]conduit.Incoming, deliver conduit.Delivery) {
	t.Helper()
	tr, b := connectedTransport(t, Config{MaxPayload: 1 << 16, MaxLong: 4 << 20}, aborts)
	seg = make([]byte, 2<<20)
	tr.place = func(dest uint64, n int) []byte {
		if dest > uint64(len(seg)) || uint64(n) > uint64(len(seg))-dest {
			return nil
		}
		return seg[dest : dest+uint64(n)]
	}
	payload = make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i*7 + i>>11)
	}
	h = conduit.Header{Cat: conduit.Long, IsReq: true, Handler: 210, NArgs: 1, Dest: 4096}
	stream := appendAM(nil, &h, payload)
	half := len(stream) / 2 // more than longSleepMin of the payload is still to come
	if _, err := b.Write(stream[:half]); err != nil {
		t.Fatal(err)
	}
	got = new([]conduit.Incoming)
	deliver = func(in *conduit.Incoming) {
		*got = append(*got, *in)
		if !bytes.Equal(in.Payload, payload) {
			t.Errorf("the Long's payload (%d bytes) differs from the %d sent", len(in.Payload), len(payload))
		}
	}
	l := tr.peers[0]
	// Until the first half has been read, a Poll may still be reading it.
	for i := 0; i < 100000 && !(l.long.active && l.long.got == half-headLen(1)); i++ {
		tr.Poll(false, deliver)
	}
	if !l.long.active || l.long.got != half-headLen(1) {
		t.Fatalf("the first half of the Long was not read into the segment (active %v, %d of %d bytes)", l.long.active, l.long.got, half-headLen(1))
	}
	return tr, stream[half:], b, seg, payload, h, got, deliver
}

// TestDirectLongStalled: a large Long whose sender stops half-way. A Poll
// returns without delivering it and without losing the connection, every
// time it is called, and never sleeps for the rest (smp.Remote's contract:
// Poll never blocks; the user's AMPoll and the spin wait mode call it); once
// the rest arrives, the Long is delivered, placed, with every byte. A Poll
// that kept waiting for the stalled bytes would hang the test.
func TestDirectLongStalled(t *testing.T) {
	aborts := make(chan string, 1)
	tr, rest, b, seg, payload, h, got, deliver := stalledLong(t, aborts)
	defer tr.Close()
	l := tr.peers[0]
	tr.sleepHook = func() { t.Error("Poll slept (ppoll) while a large Long was half-arrived") }
	for i := 0; i < 3; i++ {
		if n := tr.Poll(false, deliver); n != 0 || len(*got) != 0 {
			t.Fatalf("Poll delivered %d AMs of a Long of which half has arrived", n)
		}
	}
	if !l.long.active || l.long.ready {
		t.Fatalf("the half-arrived Long is no longer pending (active %v, ready %v)", l.long.active, l.long.ready)
	}
	if l.gone.Load() {
		t.Fatal("the connection was dropped while the sender stalled")
	}
	if _, err := b.Write(rest); err != nil {
		t.Fatal(err)
	}
	wantPlacedLong(t, func() { tr.Poll(false, deliver) }, aborts, got, seg, payload, h)
}

// TestDirectLongPollWait: the same half-arrived Long, served by PollWait (a
// library wait in the block or spin-block mode): it sleeps in ppoll(2) for
// the rest instead of returning to busy-poll, and the rest - written by the
// sender once the first sleep has begun - is read and the Long delivered,
// placed and whole, by PollWait calls.
func TestDirectLongPollWait(t *testing.T) {
	aborts := make(chan string, 1)
	tr, rest, b, seg, payload, h, got, deliver := stalledLong(t, aborts)
	defer tr.Close()
	sleeps := 0
	tr.sleepHook = func() {
		sleeps++
		if sleeps == 1 {
			go b.Write(rest) // the sender goes on while the receiver sleeps
		}
	}
	wantPlacedLong(t, func() {
		tr.PollWait(false, deliver)
		if sleeps == 0 {
			t.Fatal("PollWait returned without sleeping while a large Long was half-arrived and the socket empty")
		}
	}, aborts, got, seg, payload, h)
}

// wantPlacedLong calls poll until the stalled Long of stalledLong has been
// delivered (failing after 20 s, or when the job ends), then checks that it
// arrived placed, for its handler, with its payload in the segment.
func wantPlacedLong(t *testing.T, poll func(), aborts <-chan string, got *[]conduit.Incoming, seg, payload []byte, h conduit.Header) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(*got) == 0 {
		poll()
		if time.Now().After(deadline) {
			t.Fatal("the Long did not arrive once its sender went on")
		}
		select {
		case msg := <-aborts:
			t.Fatalf("the job ended: %s", msg)
		default:
		}
	}
	if !(*got)[0].Placed || (*got)[0].Handler != h.Handler {
		t.Errorf("the Long arrived as %+v placed %v", (*got)[0].Header, (*got)[0].Placed)
	}
	if !bytes.Equal(seg[h.Dest:h.Dest+uint64(len(payload))], payload) {
		t.Error("the segment does not hold the Long's payload")
	}
}
