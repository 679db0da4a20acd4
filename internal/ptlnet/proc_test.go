package ptlnet

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

// The flood: every rank sends floodMsgs messages of mixed sizes (8 B to
// 4 MiB) to every other rank while they do the same, each message with a
// CRC-32 of its payload in its header; every receiver checks size, checksum,
// order and exactly-once per source, and acknowledges each message from
// inside its Handler (so Handlers send while their peers' Handlers do too).

const floodMsgs = 1500

// floodSize is the payload size of message seq from src to dst.
func floodSize(src, dst, seq int) int {
	switch {
	case seq%150 == 75:
		return 4 << 20
	case seq%37 == 5:
		return 300<<10 + seq
	case seq%11 == 3:
		return 5000 + seq
	}
	return 8 + (seq*7+src*3+dst)%300
}

// fillPattern fills b with a pseudo-random pattern seeded by (src, dst, seq).
func fillPattern(b []byte, src, dst, seq int) {
	x := uint64(src)<<40 ^ uint64(dst)<<20 ^ uint64(seq) ^ 0x9e3779b97f4a7c15
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	for ; i < len(b); i++ {
		b[i] = byte(x >> (8 * (i & 7)))
	}
}

// Flood header: kind, src rank, seq, size, crc, then padding to a length
// that varies with seq (17 .. MaxHeaderSize bytes).
const (
	kindData = 1
	kindAck  = 2
)

func floodHeader(b []byte, kind byte, src, seq, size int, crc uint32) []byte {
	hl := 17 + seq%(MaxHeaderSize-16)
	b = b[:hl]
	clear(b)
	b[0] = kind
	binary.LittleEndian.PutUint32(b[1:], uint32(src))
	binary.LittleEndian.PutUint32(b[5:], uint32(seq))
	binary.LittleEndian.PutUint32(b[9:], uint32(size))
	binary.LittleEndian.PutUint32(b[13:], crc)
	return b
}

// flood runs the exchange between the Nets of ranks (ids[r] is rank r's), as
// rank me; ready is called once this rank's Handler is in place and must
// return once every rank's is (a barrier).
func flood(t *testing.T, me int, ids []PhysID, open func(Handler) *Net, ready func()) {
	size := len(ids)
	var mu sync.Mutex
	nextData := make([]int, size) // next seq expected from each source
	nextAck := make([]int, size)  // next ack expected from each destination
	rankOf := map[PhysID]int{}
	for r, id := range ids {
		rankOf[id] = r
	}
	var n *Net
	var ackHdr [MaxHeaderSize]byte
	var errs []string
	fail := func(f string, a ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(f, a...))
		}
	}
	handler := func(src Peer, hdr, payload []byte) {
		mu.Lock()
		defer mu.Unlock()
		r, ok := rankOf[src.ID]
		if !ok || len(hdr) < 17 || src.UID != n.UID() {
			fail("message from unknown peer %+v, hdr %d bytes", src, len(hdr))
			return
		}
		if int(binary.LittleEndian.Uint32(hdr[1:])) != r {
			fail("rank %d's message claims rank %d", r, binary.LittleEndian.Uint32(hdr[1:]))
		}
		seq := int(binary.LittleEndian.Uint32(hdr[5:]))
		switch hdr[0] {
		case kindData:
			if seq != nextData[r] {
				fail("from rank %d: seq %d, want %d", r, seq, nextData[r])
			}
			nextData[r] = seq + 1
			want := floodSize(r, me, seq)
			if len(payload) != want || int(binary.LittleEndian.Uint32(hdr[9:])) != want {
				fail("from rank %d seq %d: %d bytes, want %d", r, seq, len(payload), want)
			} else if crc32.ChecksumIEEE(payload) != binary.LittleEndian.Uint32(hdr[13:]) {
				fail("from rank %d seq %d: checksum mismatch", r, seq)
			}
			if len(hdr) != 17+seq%(MaxHeaderSize-16) {
				fail("from rank %d seq %d: header of %d bytes", r, seq, len(hdr))
			}
			if err := n.Send(src.ID, floodHeader(ackHdr[:], kindAck, me, seq, 0, 0), nil); err != nil {
				fail("ack to rank %d: %v", r, err)
			}
		case kindAck:
			if seq != nextAck[r] {
				fail("ack from rank %d: seq %d, want %d", r, seq, nextAck[r])
			}
			nextAck[r] = seq + 1
		default:
			fail("kind %d", hdr[0])
		}
	}
	opened := open(handler)
	mu.Lock() // the Handler reads n under mu
	n = opened
	mu.Unlock()
	ready()
	// A watchdog: if the flood is not over well within the job's limit, say
	// where everything stands (the job is killed without output otherwise).
	over := make(chan struct{})
	defer close(over)
	go func() {
		select {
		case <-over:
		case <-time.After(100 * time.Second):
			mu.Lock()
			fmt.Fprintf(os.Stderr, "rank %d stuck: received %v acks %v stats %+v\n", me, nextData, nextAck, n.Stats())
			mu.Unlock()
			buf := make([]byte, 1<<20)
			os.Stderr.Write(buf[:runtime.Stack(buf, true)])
		}
	}()
	buf := make([]byte, 4<<20)
	var hb [MaxHeaderSize]byte
	for seq := 0; seq < floodMsgs; seq++ {
		for k := 1; k < size; k++ {
			dst := (me + k) % size
			p := buf[:floodSize(me, dst, seq)]
			fillPattern(p, me, dst, seq)
			if err := n.Send(ids[dst], floodHeader(hb[:], kindData, me, seq, len(p), crc32.ChecksumIEEE(p)), p); err != nil {
				t.Fatalf("send %d to rank %d: %v", seq, dst, err)
			}
		}
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		mu.Lock()
		done := true
		for r := range size {
			if r != me && (nextData[r] < floodMsgs || nextAck[r] < floodMsgs) {
				done = false
			}
		}
		e := append([]string(nil), errs...)
		nd, na := append([]int(nil), nextData...), append([]int(nil), nextAck...)
		mu.Unlock()
		if len(e) > 0 {
			t.Fatalf("rank %d: %v", me, e)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank %d: timed out: received %v, acks %v of %d; stats %+v", me, nd, na, floodMsgs, n.Stats())
		}
		n.Poll()
		time.Sleep(time.Millisecond)
	}
	st := n.Stats()
	t.Logf("rank %d: %+v", me, st)
	if st.Malformed != 0 || st.Refused != 0 || st.Received != uint64(2*floodMsgs*(size-1)) {
		t.Errorf("rank %d: stats %+v, want %d received", me, st, 2*floodMsgs*(size-1))
	}
}

// floodRank runs flood in a rank of an spmdtest job: the ranks exchange
// their physical IDs through the bootstrap, flood, and close after a barrier.
func floodRank(t *testing.T) *Net {
	bs, err := boot.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	var n *Net
	open := func(h Handler) *Net {
		if n, err = Open(Config{PID: PIDAny}, h); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Open first (the Handler only needs n once messages arrive). The inner
	// Handler is published atomically: messages arrive only after the
	// barrier in flood, but that order passes through other processes,
	// where the race detector cannot see it.
	var inner atomic.Pointer[Handler]
	net0 := open(func(src Peer, hdr, payload []byte) {
		h := inner.Load()
		if h == nil {
			t.Errorf("a message from %v arrived before this rank's Handler was in place", src.ID)
			return
		}
		(*h)(src, hdr, payload)
	})
	var mine [8]byte
	binary.LittleEndian.PutUint32(mine[0:], net0.ID().NID)
	binary.LittleEndian.PutUint32(mine[4:], net0.ID().PID)
	all, err := bs.AllGather(mine[:])
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]PhysID, len(all))
	for r, b := range all {
		ids[r] = PhysID{NID: binary.LittleEndian.Uint32(b[0:]), PID: binary.LittleEndian.Uint32(b[4:])}
	}
	flood(t, bs.Rank(), ids, func(h Handler) *Net { inner.Store(&h); return net0 }, func() {
		if err := bs.Barrier(); err != nil {
			t.Fatal(err)
		}
	})
	if err := bs.Barrier(); err != nil {
		t.Fatal(err)
	}
	if err := net0.Close(); err != nil {
		t.Fatal(err)
	}
	return net0
}

// TestFloodProcesses: two and four processes on one host (shared memory).
func TestFloodProcesses(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			spmdtest.Run(t, n, func(t *testing.T) {
				if st := floodRank(t).Stats(); st.TCPConns != 0 || st.ShmConns == 0 {
					t.Errorf("stats %+v: want shared memory only", st)
				}
			}, spmdtest.Timeout(180*time.Second))
		})
	}
}

// TestFloodNetns: four processes on two network-namespace hosts: shared
// memory inside a host, TCP authenticated with the job secret between them.
func TestFloodNetns(t *testing.T) {
	var opts []spmdtest.Option
	if adjust := spmdtest.Netns(t, 2); adjust != nil {
		opts = append(opts, spmdtest.Launch(adjust))
	}
	spmdtest.Run(t, 4, func(t *testing.T) {
		n := floodRank(t)
		if st := n.Stats(); st.TCPConns == 0 || st.ShmConns == 0 {
			t.Errorf("stats %+v: want connections over both shared memory and TCP", st)
		}
	}, append(opts, spmdtest.Timeout(180*time.Second))...)
}

// TestFloodInProcess runs the flood between Nets of one process (goroutines
// as ranks), over shared memory and over TCP, so that -race sees both paths.
func TestFloodInProcess(t *testing.T) {
	for _, tcp := range []bool{false, true} {
		t.Run(map[bool]string{false: "shm", true: "tcp"}[tcp], func(t *testing.T) {
			const size = 4
			cfg := Config{PID: PIDAny, NoTCP: !tcp, ForceTCP: tcp, Secret: testSecret}
			nets := make([]*Net, size)
			inner := make([]Handler, size)
			ids := make([]PhysID, size)
			for r := range nets {
				n, err := Open(cfg, func(src Peer, hdr, payload []byte) { inner[r](src, hdr, payload) })
				if err != nil {
					t.Fatal(err)
				}
				defer n.Close()
				nets[r], ids[r] = n, n.ID()
			}
			var wg, ready sync.WaitGroup
			ready.Add(size)
			for r := range nets {
				wg.Add(1)
				go func() {
					defer wg.Done()
					flood(t, r, ids, func(h Handler) *Net { inner[r] = h; return nets[r] }, func() { ready.Done(); ready.Wait() })
				}()
			}
			wg.Wait()
		})
	}
}
