package gex

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
)

// No silent hangs: what a rank knows about a peer that left the job, its
// own communication progress, and what it waits on (docs/core.md, "Ending a
// job").

// watchState is the client's part of it.
type watchState struct {
	// fault is set once a rank left the job while this rank was still in
	// it; every library wait then fails with it.
	fault atomic.Pointer[Error]
	// progress grows with every AM sent or delivered; a launcher watching
	// for hangs (gexrun --hang-timeout) compares successive reports.
	progress atomic.Uint64

	mu     sync.Mutex
	waitOp string      // the library wait in progress, or ""
	waitEv *eventState // the event it waits for, or nil
	nwait  int         // waits in progress

	stop chan struct{}
}

// peerLeft is the conduit's report that rank left the job early.
func (c *Client) peerLeft(rank int, msg string) {
	if !strings.Contains(msg, "rank "+strconv.Itoa(rank)+" ") {
		msg = fmt.Sprintf("rank %d left the job: %s", rank, msg)
	}
	c.watch.fault.CompareAndSwap(nil, &Error{Op: "wait", Code: ErrCodeResource, Msg: msg})
}

// faultErr is the error a wait named op returns once a rank left, or nil.
func (c *Client) faultErr(op string) error {
	f := c.watch.fault.Load()
	if f == nil {
		return nil
	}
	return &Error{Op: op, Code: f.Code, Msg: f.Msg + c.pendingWords()}
}

// beginWait records that the calling goroutine waits in op for the
// operation of ev (nil: unknown); endWait undoes it.
func (c *Client) beginWait(op string, ev *eventState) {
	w := &c.watch
	w.mu.Lock()
	w.waitOp, w.waitEv = op, ev
	w.nwait++
	w.mu.Unlock()
}

func (c *Client) endWait() {
	w := &c.watch
	w.mu.Lock()
	if w.nwait--; w.nwait == 0 {
		w.waitOp, w.waitEv = "", nil
	}
	w.mu.Unlock()
}

// waiting says what this rank waits on, in words, or "".
func (c *Client) waiting() string {
	w := &c.watch
	w.mu.Lock()
	op, ev := w.waitOp, w.waitEv
	w.mu.Unlock()
	if op == "" || ev == nil {
		return op
	}
	return op + " for " + ev.describe()
}

// pendingWords is " (pending: ...)" naming what the calling rank waited
// on, for error messages.
func (c *Client) pendingWords() string {
	if s := c.waiting(); s != "" {
		return " (pending: " + s + ")"
	}
	return ""
}

// startWatch connects the client to what its bootstrap offers: reports of
// ranks leaving, progress reports, and stack dumps on SIGQUIT (process
// ranks only).
func (c *Client) startWatch(processRank bool) {
	if w, ok := c.cd.(interface {
		OnPeerLeft(func(rank int, msg string))
	}); ok {
		w.OnPeerLeft(c.peerLeft)
	}
	c.watch.stop = make(chan struct{})
	if !processRank {
		return
	}
	if rep, ok := c.cd.(interface{ Bootstrap() boot.Bootstrap }); ok {
		if pr, ok := rep.Bootstrap().(boot.ProgressReporter); ok {
			if d := boot.ProgressInterval(); d > 0 {
				go c.reportProgress(pr, d)
			}
		}
	}
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGQUIT)
	go func() {
		select {
		case <-quit:
			c.dumpStacks()
			os.Exit(2) // as Go's own SIGQUIT dump does
		case <-c.watch.stop:
			signal.Stop(quit)
		}
	}()
}

func (c *Client) stopWatch() {
	if c.watch.stop != nil {
		close(c.watch.stop)
	}
}

// progressCount grows with every AM sent or delivered: the client's count,
// plus the smp conduit's counts of AMs sent and (without a remote
// transport) delivered through shared memory, which inject and polled do
// not add one by one (an atomic add per AM).
func (c *Client) progressCount() uint64 {
	n := c.watch.progress.Load()
	if c.smp != nil {
		n += c.smp.SentTraffic()
		if c.ringsCount {
			n += c.smp.RecvTraffic()
		}
	}
	return n
}

// reportProgress sends the progress count and the current wait every d.
func (c *Client) reportProgress(pr boot.ProgressReporter, d time.Duration) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if pr.ReportProgress(c.progressCount(), c.waiting()) != nil {
				return
			}
		case <-c.watch.stop:
			return
		}
	}
}

// dumpStacks prints every goroutine's stack (Go's own dump, as SIGQUIT
// prints it) with every line prefixed "[rank R] ", then what the rank waits
// on, to stderr in one write.
func (c *Client) dumpStacks() {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	prefix := "[rank " + strconv.Itoa(c.rank) + "] "
	var b strings.Builder
	b.WriteString(prefix + "SIGQUIT: goroutine stacks of rank " + strconv.Itoa(c.rank) + "\n")
	for _, line := range strings.Split(strings.TrimRight(string(buf), "\n"), "\n") {
		b.WriteString(prefix + line + "\n")
	}
	what := c.waiting()
	if what == "" {
		what = "no gexgo wait"
	}
	b.WriteString(prefix + "waits in: " + what + "\n")
	os.Stderr.WriteString(b.String())
}

// WaitContext is Event.Wait with a deadline: it polls until the event has
// completed (then consumes it and returns its result, as Wait does) or until
// ctx is done, when it returns an error wrapping ctx.Err() and ErrNotReady
// that names what was pending; the event is then still pending and may be
// waited on again. Like every library wait it fails, naming the rank, once a
// rank has left the job. (gex_Event_Wait, GASNet-EX "Events", with a Go
// context added.)
func (e Event) WaitContext(ctx context.Context) error {
	if e.s == nil {
		return nil
	}
	if err := e.check("Event.WaitContext"); err != nil {
		return err
	}
	c := e.s.c
	if !e.s.complete() {
		var cerr error
		err := c.blockUntilEv("Event.WaitContext", e.s, func() bool {
			if e.s.complete() {
				return true
			}
			if cerr = ctx.Err(); cerr != nil {
				return true
			}
			return false
		})
		if err != nil {
			return err
		}
		if cerr != nil && !e.s.complete() {
			return &ctxError{err: &Error{Op: "Event.WaitContext", Code: ErrCodeNotReady,
				Msg: fmt.Sprintf("%v while waiting for %s", cerr, e.s.describe())}, ctx: cerr}
		}
	}
	return e.s.consume()
}

// ctxError is an *Error that also wraps the context's error.
type ctxError struct {
	err *Error
	ctx error
}

func (e *ctxError) Error() string   { return e.err.Error() }
func (e *ctxError) Unwrap() []error { return []error{e.err, e.ctx} }

// describe names an event's operation and the peer it waits on, in words.
func (s *eventState) describe() string {
	what := s.what
	if what == "" {
		what = "an operation"
	}
	peer := int(s.peer)
	if s.coll != nil {
		peer = s.c.coll.waitingOn(s.coll)
	}
	if peer >= 0 {
		what += " (peer: rank " + strconv.Itoa(peer) + ")"
	}
	return what
}

// waitingOn is the job rank whose message collective op waits for next, or
// -1 when that is not one rank (broadcasts and reductions wait on a tree).
func (e *collEngine) waitingOn(op *collOp) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if op.shm {
		if op.sub == nil {
			return op.shmWaitingOn()
		}
		op = op.sub // a leader in the network phase of a hierarchical barrier
	}
	if op.kind != kindBarrier || op.n <= 1 || 1<<op.step >= op.n || op.ts.tm == nil {
		return -1
	}
	// advanceBarrier: in round k rank i waits for rank (i-2^k) mod N.
	from := ((op.me-1<<op.step)%op.n + op.n) % op.n
	return op.ts.tm.jobrank(Rank(from))
}

// BlockUntilContext is BlockUntil with a deadline (GASNET_BLOCKUNTIL, with a
// Go context added): it polls until cond returns true, or until ctx is done,
// when it returns an error wrapping ctx.Err() and ErrNotReady.
func (c *Client) BlockUntilContext(ctx context.Context, cond func() bool) error {
	var cerr error
	err := c.blockUntil("BlockUntilContext", func() bool {
		if cond() {
			return true
		}
		cerr = ctx.Err()
		return cerr != nil
	})
	if err != nil {
		return err
	}
	if cerr != nil {
		return &ctxError{err: &Error{Op: "BlockUntilContext", Code: ErrCodeNotReady,
			Msg: fmt.Sprintf("%v before the condition held", cerr)}, ctx: cerr}
	}
	return nil
}
