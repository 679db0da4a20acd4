package ptlnet

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// selfQueue carries messages a Net sends to itself: encoded back to back
// ([u16 hdrLen][u32 payloadLen][hdr][payload]) into a buffer that is swapped
// with a spare when drained, so steady-state sends allocate nothing.
type selfQueue struct {
	mu    sync.Mutex // guards buf
	buf   []byte
	spare []byte // owned by the drainer (rxMu)
	n     atomic.Int64
}

const selfRec = 6

func (q *selfQueue) push(hdr, payload []byte) {
	q.mu.Lock()
	var rec [selfRec]byte
	binary.LittleEndian.PutUint16(rec[0:], uint16(len(hdr)))
	binary.LittleEndian.PutUint32(rec[2:], uint32(len(payload)))
	q.buf = append(q.buf, rec[:]...)
	q.buf = append(q.buf, hdr...)
	q.buf = append(q.buf, payload...)
	q.n.Add(1)
	q.mu.Unlock()
}

func (q *selfQueue) empty() bool { return q.n.Load() == 0 }

// drain runs the Handler for every queued message. rxMu held.
func (q *selfQueue) drain(n *Net) int {
	if q.n.Load() == 0 {
		return 0
	}
	q.mu.Lock()
	b := q.buf
	q.buf = q.spare[:0]
	k := q.n.Swap(0)
	q.mu.Unlock()
	orig := b
	src := Peer{ID: n.id, UID: n.uid}
	for len(b) >= selfRec {
		hl := int(binary.LittleEndian.Uint16(b[0:]))
		pl := int(binary.LittleEndian.Uint32(b[2:]))
		b = b[selfRec:]
		n.st.recv.Add(1)
		n.hb(src, b[:hl:hl], b[hl:hl+pl:hl+pl])
		b = b[hl+pl:]
	}
	if cap(orig) <= 4<<20 {
		q.spare = orig[:0]
	} else {
		q.spare = nil
	}
	return int(k)
}
