package shm_test

import (
	"encoding/binary"
	"fmt"

	"github.com/gexgo/gexgo/internal/shm"
)

// A region holding a ring and the consumer's Bell: a producer (here the same
// goroutine; normally another rank) commits and rings; the consumer drains,
// sleeping on the Bell when every inbound ring is empty.
func Example() {
	const nslots, slotSize = 16, 64
	heap := shm.NewHeap() // shm.Memfd{} across processes
	r, err := heap.Create("inbox", shm.RingBytes(nslots, slotSize)+64)
	if err != nil {
		panic(err)
	}
	defer r.Close()
	inbox, err := shm.InitRing(r.Bytes(), nslots, slotSize)
	if err != nil {
		panic(err)
	}
	bellOff := shm.RingBytes(nslots, slotSize)
	bell := shm.BellAt(r.Bytes(), bellOff)

	// Producer: map the region from its Desc, attach, reserve, fill, commit, ring.
	peer, err := heap.Open(r.Desc())
	if err != nil {
		panic(err)
	}
	out, err := shm.AttachRing(peer.Bytes())
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		data, ticket, ok := out.TryReserve()
		if !ok {
			break // full: retry later
		}
		binary.LittleEndian.PutUint32(data, uint32(i*i))
		out.Commit(ticket)
		shm.BellAt(peer.Bytes(), bellOff).Ring()
	}

	// Consumer.
	for n := 0; n < 3; {
		data, ok := inbox.Peek()
		if !ok {
			bell.Sleep(func() bool { return !inbox.Empty() }, 0)
			continue
		}
		fmt.Println(binary.LittleEndian.Uint32(data))
		inbox.Release()
		n++
	}
	// Output:
	// 0
	// 1
	// 4
}
