package shm

import (
	"sync/atomic"
	"unsafe"
)

// flagAt returns buffer i's flag word; i must be in [0, p.n).
func (p *Pool) flagAt(i int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(p.flags)), i*poolFlagStride))
}

// bufAt returns buffer i's bytes (len == cap == bufSize); i must be in [0, p.n).
func (p *Pool) bufAt(i int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(p.bufs)), i*p.bufSize)), p.bufSize)
}
