package boot

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PeerWatch is implemented by the bootstraps that learn of a rank leaving the
// job early (its process ended without Close, Exit or Abort while other
// ranks were still in the job): the launcher's (it sees the process end) and,
// for ranks of one host, PMI's (see WatchPeers). fn runs once per such rank,
// on a goroutine of the bootstrap, before this process is ended; msg says
// which rank left and how, in words. fn must be quick and must not block.
type PeerWatch interface {
	OnPeerLeft(fn func(rank int, msg string))
}

// ProgressReporter is implemented by bootstraps that can report this rank's
// communication progress to a launcher watching for hangs (gexrun
// --hang-timeout). ProgressInterval says how often; 0 means nobody asked.
type ProgressReporter interface {
	// ReportProgress sends count (which grows with every AM sent or
	// delivered) and what the rank waits on ("" if nothing).
	ReportProgress(count uint64, msg string) error
}

// EnvProgressMS is set by a launcher that watches for hangs: the interval in
// milliseconds at which ranks report their progress.
const EnvProgressMS = "GEX_PROGRESS_MS"

// ProgressInterval is the interval EnvProgressMS asks for, or 0.
func ProgressInterval() time.Duration {
	ms, err := strconv.Atoi(os.Getenv(EnvProgressMS))
	if err != nil || ms <= 0 {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// peerHooks is a list of OnPeerLeft functions; each rank is reported once.
type peerHooks struct {
	mu   sync.Mutex
	fns  []func(rank int, msg string)
	seen map[int]bool
}

func (h *peerHooks) add(fn func(rank int, msg string)) {
	h.mu.Lock()
	h.fns = append(h.fns, fn)
	h.mu.Unlock()
}

// run calls every hook for rank, unless rank was reported before; it reports
// whether this was the first report.
func (h *peerHooks) run(rank int, msg string) bool {
	h.mu.Lock()
	if h.seen == nil {
		h.seen = map[int]bool{}
	}
	if h.seen[rank] {
		h.mu.Unlock()
		return false
	}
	h.seen[rank] = true
	fns := append([]func(int, string){}, h.fns...)
	h.mu.Unlock()
	for _, fn := range fns {
		fn(rank, msg)
	}
	return true
}

// RankList is "rank 3 was" or "ranks 0, 2, 3 were": the ranks still running
// in the one line that says a rank left the job.
func RankList(rs []int) string {
	if len(rs) == 1 {
		return "rank " + strconv.Itoa(rs[0]) + " was"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = strconv.Itoa(r)
	}
	return "ranks " + strings.Join(parts, ", ") + " were"
}
