//go:build !amd64 || race

package memcopy

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns
// that count: here it is copy, so the race detector sees the accesses.
func Copy(dst, src []byte) int { return copy(dst, src) }

// CopyHot is Copy here (REP MOVSB is amd64's, and the race detector must
// see the accesses).
func CopyHot(dst, src []byte) int { return copy(dst, src) }

// CopyNT is Copy here.
func CopyNT(dst, src []byte) int { return copy(dst, src) }
