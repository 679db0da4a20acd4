package launch

import (
	"fmt"
	"syscall"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/boot/bootwire"
)

// rankState is what the server knows of a rank beyond its connection.
type rankState struct {
	joined    bool      // its HELLO was admitted (it is a gex rank)
	finalized bool      // it sent FINALIZE (called Close): it may end now
	count     uint64    // the last PROGRESS count
	msg       string    // the last PROGRESS message: what it waits on
	changed   time.Time // when it joined or its count last changed
}

// joined records rank's admission; s.mu must be held.
func (s *Server) joined(rank int) {
	s.st[rank].joined = true
	s.st[rank].changed = time.Now()
}

// finalize handles FINALIZE from sc: record, then acknowledge, so the owner
// can tell the rank's end from a rank leaving the job once it sees the
// process end.
func (s *Server) finalize(sc *serverConn) {
	s.mu.Lock()
	s.st[sc.rank].finalized = true
	s.mu.Unlock()
	sc.send(&bootwire.Finalized{})
}

// progress records a PROGRESS report of rank.
func (s *Server) progress(rank int, m *bootwire.Progress) {
	s.mu.Lock()
	st := &s.st[rank]
	if m.Count != st.count {
		st.count, st.changed = m.Count, time.Now()
	}
	st.msg = m.Msg
	s.mu.Unlock()
}

// Joined reports whether rank has ever been admitted (it called
// gex.ClientInit, or boot.Connect).
func (s *Server) Joined(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rank >= 0 && rank < s.size && s.st[rank].joined
}

// AnyJoined reports whether any rank has been admitted.
func (s *Server) AnyJoined() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.st {
		if st.joined {
			return true
		}
	}
	return false
}

// Finalized reports whether rank sent FINALIZE (it called Close).
func (s *Server) Finalized(rank int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return rank >= 0 && rank < s.size && s.st[rank].finalized
}

// RankProgress is a rank's last progress report (Server.Progress).
type RankProgress struct {
	Joined, Finalized bool
	Count             uint64
	Waiting           string    // what the rank last said it waits on
	Changed           time.Time // when it joined or its count last changed
}

// Progress returns every rank's last progress report, by rank.
func (s *Server) Progress() []RankProgress {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RankProgress, s.size)
	for r, st := range s.st {
		out[r] = RankProgress{Joined: st.joined, Finalized: st.finalized, Count: st.count, Waiting: st.msg, Changed: st.changed}
	}
	return out
}

// PeerLeft tells every connected rank that has not finalized, except rank,
// that rank left the job (PEERLEFT{rank, code, delay, msg}): they fail their
// pending waits naming it and exit with code after delay. The job is ending
// from now on: a rank that connects later is told EXITNOW{code}, and a later
// EXIT is answered with code. It returns the ranks it told.
func (s *Server) PeerLeft(rank, code int, delay time.Duration, msg string) []int {
	s.exitMu.Lock()
	defer s.exitMu.Unlock()
	s.mu.Lock()
	if !s.ending {
		s.ending, s.endCode = true, int32(code)
	}
	var targets []*serverConn
	for r, sc := range s.ranks {
		if sc != nil && r != rank && !s.st[r].finalized {
			targets = append(targets, sc)
		}
	}
	s.mu.Unlock()
	m := &bootwire.PeerLeft{Rank: uint32(rank), Code: int32(code), DelayMS: uint32(delay / time.Millisecond), Msg: msg}
	var told []int
	for _, sc := range targets {
		if sc.send(m) == nil {
			told = append(told, sc.rank)
		}
	}
	return told
}

// watch is the job's state for ranks that leave early and for hangs. Used
// by Run's goroutine only.
type watch struct {
	srv     *Server
	exited  []bool     // by rank: the process has been reaped
	pending []rankExit // ranks that exited 0 before any rank joined: judged once one does
	tickT   *time.Ticker
	tickC   <-chan time.Time
}

func (j *job) startWatch(srv *Server) {
	j.srv = srv
	j.exited = make([]bool, j.cfg.N)
	if j.cfg.HangTimeout > 0 {
		j.armTick()
	}
}

func (j *job) stopWatch() {
	if j.tickT != nil {
		j.tickT.Stop()
	}
}

// armTick starts the ticker that judges pending leavers and hangs.
func (j *job) armTick() {
	if j.tickT != nil {
		return
	}
	d := 50 * time.Millisecond
	if h := j.cfg.HangTimeout; h > 0 {
		d = min(d, max(h/4, 5*time.Millisecond))
	}
	j.tickT = time.NewTicker(d)
	j.tickC = j.tickT.C
}

func (j *job) tick() {
	if j.ending != running {
		return
	}
	if len(j.pending) > 0 && j.srv.AnyJoined() {
		ex := j.pending[0]
		j.pending = nil
		if others := j.stillRunning(ex.r.rank); len(others) > 0 {
			_, how, code := ex.describe()
			j.leave(ex.r.rank, ex.r.pid, how+" without calling Close", code, others)
			return
		}
	}
	j.checkHang()
}

// stillRunning returns the ranks other than r that are in the job: their
// process runs, they joined (ClientInit) and have not called Close.
func (j *job) stillRunning(r int) []int {
	var out []int
	for q := range j.cfg.N {
		if q != r && q < len(j.ranks) && !j.exited[q] && j.srv.Joined(q) && !j.srv.Finalized(q) {
			out = append(out, q)
		}
	}
	return out
}

// leftEarly applies the rule for a rank whose process ended while the job is
// running, and reports whether it did. A rank that called Close (FINALIZE)
// has ended normally. Otherwise, if other ranks are still in the job, it
// left the job early, whatever its status: the job ends as gasnet_exit with
// that status would (leave). A rank that exits 0 before any rank has joined
// is judged when one does (a program that never calls ClientInit is not a
// gex job, and its ranks may end when they like).
func (j *job) leftEarly(ex rankExit, failed bool, how string, code int) bool {
	r := ex.r.rank
	if j.srv == nil || j.srv.Finalized(r) {
		return false
	}
	if !failed && !j.srv.Joined(r) && !j.srv.AnyJoined() {
		j.pending = append(j.pending, ex)
		j.armTick()
		return true
	}
	others := j.stillRunning(r)
	if len(others) == 0 {
		return false
	}
	if !failed {
		how += " without calling Close"
	}
	j.leave(r, ex.r.pid, how, code, others)
	return true
}

// leave ends the job because rank r left it while others were still in it:
// one line naming r and them; PEERLEFT to every connected rank (its pending
// waits fail naming r, then it exits with code after half the grace time);
// SIGTERM to the ranks that are not connected; SIGKILL after Grace.
func (j *job) leave(r, pid int, how string, code int, others []int) {
	line := fmt.Sprintf("rank %d (pid %d) %s; it left while %s still running; terminating the job", r, pid, how, boot.RankList(others))
	j.finish(endFailure, code, line)
	told := map[int]bool{}
	for _, q := range j.srv.PeerLeft(r, code, j.cfg.Grace/2, line) {
		told[q] = true
	}
	for _, rp := range j.ranks {
		if rp.rank != r && !told[rp.rank] {
			rp.signal(syscall.SIGTERM)
		}
	}
	j.armGrace()
}
