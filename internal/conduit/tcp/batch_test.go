package tcp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/gexgo/gexgo/internal/conduit"
	"github.com/gexgo/gexgo/internal/nettest"
)

// countingWriter counts Write calls (a plain io.Writer: net.Buffers.WriteTo
// writes each iovec with its own Write).
type countingWriter struct {
	w      io.Writer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.w.Write(p)
}

func pattern(n, seed int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + seed)
	}
	return p
}

// TestBatcherTCP sends frames with payloads of 0, 1, 64 KiB and 4 MiB, mixed
// with small frames and control frames, over loopback TCP in several flushes,
// and checks that every frame arrives intact and in order.
func TestBatcherTCP(t *testing.T) {
	a, b := nettest.TCPPair(t)
	type sent struct {
		h frameHeader
		p []byte
	}
	var want []sent
	var flushAfter []bool // flush after want[i] was added
	sizes := []int{0, 1, 64 << 10, 4 << 20, 3, 1024, 1025, 0}
	for i, n := range sizes {
		cat := conduit.Medium
		if i%2 == 1 {
			cat = conduit.Long
		}
		h := sampleAM(cat, i%3 != 0, i%(conduit.MaxArgs+1))
		h.Handler = uint8(i)
		want = append(want, sent{frameHeader{Header: h, NBytes: n}, pattern(n, i)})
		flushAfter = append(flushAfter, false)
		for j := 0; j < 5; j++ { // interleaved small frames
			s := sampleAM(conduit.Short, true, j)
			s.Handler = uint8(100 + j)
			want = append(want, sent{frameHeader{Header: s}, nil})
			flushAfter = append(flushAfter, false)
		}
		if i == 2 {
			want = append(want, sent{frameHeader{Op: ctrlPing, Value: 99, NBytes: 4}, []byte("ping")})
			flushAfter = append(flushAfter, false)
		}
		flushAfter[len(flushAfter)-1] = i%3 == 2
	}
	errc := make(chan error, 1)
	go func() { // the sender; the test goroutine reads
		bt := newBatcher(0, 0)
		for i, w := range want {
			if w.h.Control() {
				bt.addControl(w.h.Op, w.h.Value, w.p)
			} else {
				bt.add(&w.h.Header, w.p)
			}
			if flushAfter[i] {
				if err := bt.flush(a); err != nil {
					errc <- err
					return
				}
			}
		}
		err := bt.flush(a)
		if err == nil {
			err = a.CloseWrite()
		}
		errc <- err
	}()
	fr := newFrameReader(bufio.NewReader(b), 8<<20)
	for i, w := range want {
		var h frameHeader
		if err := fr.Next(&h); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		p, err := fr.Payload()
		if err != nil {
			t.Fatalf("frame %d payload: %v", i, err)
		}
		if h != w.h || !bytes.Equal(p, w.p) {
			t.Fatalf("frame %d: got %+v (%d bytes) want %+v (%d bytes)", i, h, len(p), w.h, len(w.p))
		}
	}
	var h frameHeader
	if err := fr.Next(&h); err != io.EOF {
		t.Fatalf("after %d frames: %v, want EOF", len(want), err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestBatcherCoalesces: many small frames go out in one write; a large
// payload in the middle is its own iovec (three writes through a plain
// writer, one writev on TCP).
func TestBatcherCoalesces(t *testing.T) {
	var out bytes.Buffer
	cw := &countingWriter{w: &out}
	bt := newBatcher(256, 0)
	var ref bytes.Buffer
	for i := 0; i < 100; i++ {
		h := sampleAM(conduit.Medium, true, i%4)
		p := pattern(i, i)
		bt.add(&h, p)
		ref.Write(appendAM(nil, &h, p))
	}
	if err := bt.flush(cw); err != nil {
		t.Fatal(err)
	}
	if cw.writes != 1 || !bytes.Equal(out.Bytes(), ref.Bytes()) {
		t.Fatalf("100 small frames: %d writes, %d bytes (want 1 write, %d bytes)", cw.writes, out.Len(), ref.Len())
	}

	out.Reset()
	ref.Reset()
	cw.writes = 0
	big := pattern(10000, 3)
	for i := 0; i < 10; i++ {
		h := sampleAM(conduit.Short, false, 1)
		bt.add(&h, nil)
		ref.Write(appendAM(nil, &h, nil))
		if i == 4 {
			l := sampleAM(conduit.Long, true, 2)
			bt.add(&l, big)
			ref.Write(appendAM(nil, &l, big))
		}
	}
	if len(bt.pieces) != 2 || &bt.pieces[1].ref[0] != &big[0] {
		t.Fatalf("large payload not referenced in place: pieces %+v", len(bt.pieces))
	}
	if err := bt.flush(cw); err != nil {
		t.Fatal(err)
	}
	if cw.writes != 3 || !bytes.Equal(out.Bytes(), ref.Bytes()) {
		t.Fatalf("10 small + 1 large: %d writes (want 3 iovecs), %d bytes (want %d)", cw.writes, out.Len(), ref.Len())
	}
	if !bt.empty() || bt.pending() != 0 {
		t.Fatalf("batcher not empty after flush: %d frames, %d bytes", bt.frames, bt.pending())
	}
}

// TestBatcherCoalescesTCP counts write system calls' worth of Writes on a
// real connection: 1000 small frames, one flush, all received.
func TestBatcherCoalescesTCP(t *testing.T) {
	a, b := nettest.TCPPair(t)
	bt := newBatcher(0, 0)
	const n = 1000
	for i := 0; i < n; i++ {
		h := sampleAM(conduit.Short, true, 2)
		h.Args[0] = int32(i)
		bt.add(&h, nil)
	}
	cw := &countingWriter{w: a}
	if err := bt.flush(cw); err != nil {
		t.Fatal(err)
	}
	if cw.writes != 1 {
		t.Fatalf("%d frames: %d writes, want 1", n, cw.writes)
	}
	fr := newFrameReader(bufio.NewReader(b), 0)
	for i := 0; i < n; i++ {
		var h frameHeader
		if err := fr.Next(&h); err != nil || h.Args[0] != int32(i) {
			t.Fatalf("frame %d: %+v %v", i, h.Header, err)
		}
	}
}

func TestBatcherWouldBlock(t *testing.T) {
	bt := newBatcher(64, 1000)
	if bt.wouldBlock(1 << 30) {
		t.Fatal("an empty batcher must accept any frame")
	}
	h := sampleAM(conduit.Medium, true, 0)
	bt.add(&h, make([]byte, 500)) // referenced: frameFixed + 500 queued
	if q := bt.pending(); q != frameFixed+500 {
		t.Fatalf("pending %d, want %d", q, frameFixed+500)
	}
	if bt.wouldBlock(400) {
		t.Fatal("916 bytes is under the 1000-byte mark")
	}
	if !bt.wouldBlock(500) {
		t.Fatal("1016 bytes is over the 1000-byte mark")
	}
	if err := bt.flush(io.Discard); err != nil {
		t.Fatal(err)
	}
	if bt.wouldBlock(500) || bt.pending() != 0 {
		t.Fatal("flush did not drain the queue")
	}
}

// TestBatcherNoAllocs: add and flush, copied and referenced payloads, to a
// plain writer and to a TCP connection (writev), do not allocate once warm.
func TestBatcherNoAllocs(t *testing.T) {
	a, b := nettest.TCPPair(t)
	go io.Copy(io.Discard, b)
	small := make([]byte, 100)
	big := make([]byte, 64<<10)
	for _, w := range []struct {
		name string
		w    io.Writer
	}{{"discard", io.Discard}, {"tcp", a}} {
		bt := newBatcher(0, 0)
		run := func() {
			for i := 0; i < 8; i++ {
				h := sampleAM(conduit.Medium, true, i)
				bt.add(&h, small)
			}
			l := sampleAM(conduit.Long, true, 4)
			bt.add(&l, big)
			bt.addControl(ctrlPing, 1, nil)
			if err := bt.flush(w.w); err != nil {
				t.Fatal(err)
			}
		}
		run()
		if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
			t.Errorf("%s: %v allocs per add*10+flush", w.name, allocs)
		}
	}
}

func BenchmarkBatcherSmall(b *testing.B) {
	for _, n := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("frames=%d", n), func(b *testing.B) {
			bt := newBatcher(0, 0)
			h := sampleAM(conduit.Short, true, 2)
			b.ReportAllocs()
			for b.Loop() {
				for i := 0; i < n; i++ {
					bt.add(&h, nil)
				}
				_ = bt.flush(io.Discard)
			}
		})
	}
}
