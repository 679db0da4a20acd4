// Command legacy is a program written the GASNet-1 way (package gasnet): the
// two-step start (gasnet_init, gasnet_attach with a handler table), Active
// Messages with checksummed payloads around a ring, put/get/memset in
// blocking, explicit- and implicit-handle forms, a strided (VIS) halo
// exchange, and named split-phase barriers. Run it with the launcher:
//
//	go run ./cmd/gexrun -n 4 ./examples/legacy
//
// Every node checks what it received; node 0 prints a summary. Any failed
// check ends the job with exit code 1 (gasnet_exit).
package main

import (
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"sync/atomic"

	"github.com/gexgo/gexgo/gasnet"
)

const (
	segSize  = 1 << 20
	gridRows = 64 // each node owns a gridRows x gridCols block of bytes
	gridCols = 64
	haloOff  = 0        // the block, with one halo column on each side
	ringOff  = 64 << 10 // where the ring's Long payloads land
	workOff  = 128 << 10
)

var (
	j    *gasnet.Job
	segs []gasnet.SegInfo
	me   gasnet.Node
	n    gasnet.Node

	hToken, hTokenAck gasnet.Handler // assigned by Attach
	tokens, acks      atomic.Int64
	badToken          atomic.Int64
)

func main() {
	laps := flag.Int("laps", 20, "laps of the checksummed token around the ring")
	flag.Parse()

	var err error
	if j, err = gasnet.Init(); err != nil { // gasnet_init
		fatal("gasnet_init", err)
	}
	me, n = j.Mynode(), j.Nodes()

	// gasnet_attach: index 0 = "don't care"; Attach writes the index back.
	table := []gasnet.HandlerEntry{
		{Fn: tokenHandler, Name: "token"},
		{Fn: func(*gasnet.Token, []byte, []gasnet.HandlerArg) { acks.Add(1) }, Name: "token-ack"},
	}
	if err := j.Attach(table, segSize, 0); err != nil {
		fatal("gasnet_attach", err)
	}
	hToken, hTokenAck = table[0].Index, table[1].Index
	segs = make([]gasnet.SegInfo, n)
	check("gasnet_getSegmentInfo", j.GetSegmentInfo(segs))

	ring(*laps)
	barrier(1)
	rma()
	barrier(2)
	halo()
	barrier(3)
	mismatch()

	if me == 0 {
		fmt.Printf("legacy: %d nodes: ring of %d laps, RMA in every form, halo exchange and named barriers all checked\n", n, *laps)
	}
	barrier(4)
	j.Exit(0) // gasnet_exit, after a barrier
}

// tokenHandler receives a Medium token: its payload's CRC-32 travels as
// argument 0; it checks it and acknowledges with a Short reply.
func tokenHandler(t *gasnet.Token, buf []byte, args []gasnet.HandlerArg) {
	if uint32(args[0]) != crc32.ChecksumIEEE(buf) {
		badToken.Add(1)
	}
	tokens.Add(1)
	check("gasnet_AMReplyShort", j.AMReplyShort(t, hTokenAck))
}

// ring sends laps Medium tokens of growing size to the right neighbour and
// waits (GASNET_BLOCKUNTIL) for their acknowledgements and for the left
// neighbour's tokens.
func ring(laps int) {
	right := (me + 1) % n
	payload := make([]byte, j.AMMaxMedium())
	for lap := 0; lap < laps; lap++ {
		p := payload[:(lap*997)%len(payload)+1]
		for i := range p {
			p[i] = byte(int(me) + lap*i)
		}
		check("gasnet_AMRequestMedium", j.AMRequestMedium(right, hToken, p, gasnet.HandlerArg(crc32.ChecksumIEEE(p)), gasnet.HandlerArg(lap)))
	}
	check("GASNET_BLOCKUNTIL", j.BlockUntil(func() bool { return acks.Load() == int64(laps) && tokens.Load() == int64(laps) }))
	if badToken.Load() != 0 {
		fail("%d tokens arrived with a bad checksum", badToken.Load())
	}
}

// rma exercises the extended API against the right neighbour's work area.
func rma() {
	right := (me + 1) % n
	left := (me + n - 1) % n
	dst := segs[right].Addr + workOff + gasnet.Addr(me)*8192
	src := make([]byte, 4096)
	for i := range src {
		src[i] = byte(int(me)*3 + i)
	}
	check("gasnet_put", j.Put(right, dst, src[:100]))
	h, err := j.PutNBBulk(right, dst+100, src[100:2000])
	check("gasnet_put_nb_bulk", err)
	check("gasnet_put_nbi", j.PutNBI(right, dst+2000, src[2000:]))
	check("gasnet_memset_nbi", j.MemsetNBI(right, dst+4096, 0x5A, 4096))
	check("gasnet_wait_syncnb", j.WaitSyncnb(h))
	check("gasnet_wait_syncnbi_puts", j.WaitSyncnbiPuts())
	check("gasnet_put_val", j.PutVal(right, dst+8190, 0xBEEF, 2))
	barrier(10)

	// Read back what the left neighbour wrote into our segment, remotely
	// from ourselves (loopback) and locally.
	mine := j.Segment()[workOff+int(left)*8192:][:8192]
	got := make([]byte, 8192)
	h, err = j.GetNB(got, me, segs[me].Addr+workOff+gasnet.Addr(left)*8192)
	check("gasnet_get_nb", err)
	check("gasnet_wait_syncnb", j.WaitSyncnb(h))
	for i := 0; i < 8192; i++ {
		want := byte(0x5A)
		switch {
		case i < 4096:
			want = byte(int(left)*3 + i)
		case i == 8190:
			want = 0xEF
		case i == 8191:
			want = 0xBE
		}
		if got[i] != want || mine[i] != want {
			fail("byte %d from node %d: got %#x (local %#x), want %#x", i, left, got[i], mine[i], want)
		}
	}
	v, err := j.GetVal(right, dst+8190, 2)
	check("gasnet_get_val", err)
	if v != 0xBEEF {
		fail("gasnet_get_val = %#x, want 0xbeef", v)
	}
	vh, err := j.GetNBVal(right, dst, 1)
	check("gasnet_get_nb_val", err)
	if v, err := j.WaitSyncnbValget(vh); err != nil || v != uint64(src[0]) {
		fail("gasnet_wait_syncnb_valget = %d, %v; want %d", v, err, src[0])
	}
}

// halo: each node's block has a halo column on each side; it fills the
// right neighbour's left halo with its last interior column in one strided
// put (VIS design B: count[0] = 1 byte, gridRows rows, stride gridCols+2).
func halo() {
	const stride = gridCols + 2
	block := j.Segment()[haloOff : haloOff+gridRows*stride]
	for r := 0; r < gridRows; r++ {
		for c := 1; c <= gridCols; c++ {
			block[r*stride+c] = byte(int(me)*7 + r + c)
		}
	}
	barrier(20)
	right := (me + 1) % n
	// source: column gridCols of our block; destination: column 0 of theirs
	src := block[gridCols:]
	dst := segs[right].Addr + haloOff
	h, err := j.PutsNBBulk(right, dst, []int{stride}, src, []int{stride}, []int{1, gridRows}, 1)
	check("gasnet_puts_nb_bulk", err)
	check("gasnet_wait_syncnb", j.WaitSyncnb(h))
	barrier(21)
	left := (me + n - 1) % n
	for r := 0; r < gridRows; r++ {
		if got, want := block[r*stride], byte(int(left)*7+r+gridCols); got != want {
			fail("halo row %d: %#x, want %#x", r, got, want)
		}
	}
}

// mismatch shows the named barrier's matching rule: node 0 passes a
// different id, so every node's wait reports GASNET_ERR_BARRIER_MISMATCH.
func mismatch() {
	id := int32(100)
	if me == 0 && n > 1 {
		id = 101
	}
	check("gasnet_barrier_notify", j.BarrierNotify(id, 0))
	err := j.BarrierWait(id, 0)
	if n > 1 && gasnet.ErrorCode(err) != gasnet.ErrCodeBarrierMismatch {
		fail("named barrier with different ids: %v, want %s", err, gasnet.ErrorName(gasnet.ErrCodeBarrierMismatch))
	}
}

// barrier is a named barrier carrying id.
func barrier(id int32) {
	check("gasnet_barrier_notify", j.BarrierNotify(id, 0))
	check("gasnet_barrier_wait", j.BarrierWait(id, 0))
}

func check(what string, err error) {
	if err != nil {
		fail("%s: %v (%s)", what, err, gasnet.ErrorName(gasnet.ErrorCode(err)))
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "legacy: node %d: %s\n", me, fmt.Sprintf(format, args...))
	j.Exit(1)
}

func fatal(what string, err error) {
	fmt.Fprintf(os.Stderr, "legacy: %s: %v\n", what, err)
	os.Exit(1)
}
