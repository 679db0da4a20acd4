package gex

// Hooks of the VIS run-list codec for the external tests.

// VISEncodeRunList encodes (address, length) runs, length > 0, as path (b)
// packs them: consecutive runs of one length and gap share one entry.
func VISEncodeRunList(runs [][2]uint64) []byte {
	b := make([]byte, 0, 2*runEntryMax*(len(runs)+1))
	var e runEnc
	for _, r := range runs {
		b = b[:e.add(b[:cap(b)], len(b), r[0], int(r[1]))]
	}
	return b[:e.flush(b[:cap(b)], len(b))]
}

// VISDecodeRunsBytes runs the target's decoder and returns how many bytes
// the runs it visited cover (each visit checked against a segment-sized
// slice: a run outside it would panic).
func VISDecodeRunsBytes(list []byte, base, size uint64, total int) (int, error) {
	seg := make([]byte, size)
	n := 0
	err := visDecodeRuns(list, base, size, total, func(off uint64, k int) {
		_ = seg[off : off+uint64(k)]
		n += k
	})
	return n, err
}
