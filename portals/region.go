package portals

// region is the memory of an MD, LE or ME: one contiguous slice, or iovec elements that act
// as one virtually contiguous region for offsets (Portals 4.3 §3.10.2).
type region struct {
	buf    []byte
	iov    [][]byte
	length uint64
}

// slice returns the bytes at [off, off+n) when they are contiguous; for an iovec region the
// part of the element holding off (the "start" of an event, §3.13.4).
func (r *region) slice(off, n uint64) []byte {
	if r.iov == nil {
		if off > uint64(len(r.buf)) {
			return r.buf[len(r.buf):]
		}
		end := min(off+n, uint64(len(r.buf)))
		return r.buf[off:end:end]
	}
	for _, v := range r.iov {
		if off < uint64(len(v)) {
			end := min(off+n, uint64(len(v)))
			return v[off:end:end]
		}
		off -= uint64(len(v))
	}
	return nil
}

// write copies data to the region from off; the caller has bounded off+len(data) by length.
func (r *region) write(off uint64, data []byte) {
	if len(data) == 0 {
		return
	}
	if r.iov == nil {
		copy(r.buf[off:], data)
		return
	}
	for _, v := range r.iov {
		if len(data) == 0 {
			return
		}
		if off >= uint64(len(v)) {
			off -= uint64(len(v))
			continue
		}
		k := copy(v[off:], data)
		data = data[k:]
		off = 0
	}
}

// read returns the n bytes at off: a sub-slice when contiguous, else gathered into *scratch.
func (r *region) read(off, n uint64, scratch *[]byte) []byte {
	if n == 0 {
		return nil
	}
	if r.iov == nil {
		return r.buf[off : off+n : off+n]
	}
	b := grow(scratch, n)
	r.gather(off, b)
	return b
}

func (r *region) gather(off uint64, b []byte) {
	for _, v := range r.iov {
		if len(b) == 0 {
			return
		}
		if off >= uint64(len(v)) {
			off -= uint64(len(v))
			continue
		}
		k := copy(b, v[off:])
		b = b[k:]
		off = 0
	}
}

// grow returns (*s)[:n], enlarging the buffer if needed.
func grow(s *[]byte, n uint64) []byte {
	if uint64(cap(*s)) < n {
		*s = make([]byte, n)
	}
	return (*s)[:n]
}
