package gasnet

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/gctx"
)

// No-Interrupt Sections (GASNet-1 spec, "No-Interrupt Sections"). gexgo never
// runs handlers asynchronously on a goroutine (they run inside calls that
// poll, or on the receive goroutine), so a section's guarantee holds without
// doing anything; what remains are its rules, and those are checked: inside
// a section "the only GASNet functions which may legally be called are
// gasnet_mynode(), gasnet_nodes(), gasnet_hsl_*(), gasnet_exit(),
// gasnet_AMReply*()" and it must never block. A goroutine in a section holds
// a private HSL, so every gex call already refuses it exactly as for "code
// executing on a thread holding an HSL [which] is implicitly within a
// No-Interrupt Section"; this package rewords those errors.

// nisSet is the set of goroutines inside a No-Interrupt Section of one job.
type nisSet struct {
	n    atomic.Int32
	mu   sync.Mutex
	held map[uintptr]*gex.HSL
}

func (s *nisSet) has(g uintptr) bool {
	if s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[g] != nil
}

// wrap rewords a restricted-context error of a goroutine inside a
// No-Interrupt Section.
func (s *nisSet) wrap(err error) error {
	if err == nil || s.n.Load() == 0 || !errors.Is(err, gex.ErrRestricted) || !s.has(gctx.ID()) {
		return err
	}
	return &nisError{err}
}

type nisError struct{ err error }

func (e *nisError) Error() string {
	return "gasnet: not permitted inside a No-Interrupt Section (GASNet-1: only gasnet_mynode, gasnet_nodes, gasnet_hsl_*, gasnet_exit and gasnet_AMReply* may be called there): " + e.err.Error()
}
func (e *nisError) Unwrap() error { return e.err }

// HoldInterrupts implements gasnet_hold_interrupts: the calling goroutine
// enters a No-Interrupt Section. Inside a handler or while holding an HSL the
// call is ignored (those are implicit sections). Sections do not nest: a
// second HoldInterrupts without ResumeInterrupts is an error.
func (j *Job) HoldInterrupts() error {
	const op = "gasnet_hold_interrupts"
	g := gctx.ID()
	if j.nis.has(g) {
		return newErr(op, ErrCodeBadArg, "this goroutine is already inside a No-Interrupt Section (sections may not be nested)")
	}
	if j.c.CheckRestricted(op) != nil {
		return nil // handler context or an HSL held: already an implicit section
	}
	h := new(gex.HSL)
	h.Lock()
	j.nis.mu.Lock()
	if j.nis.held == nil {
		j.nis.held = map[uintptr]*gex.HSL{}
	}
	j.nis.held[g] = h
	j.nis.n.Add(1)
	j.nis.mu.Unlock()
	return nil
}

// ResumeInterrupts implements gasnet_resume_interrupts: it ends the calling
// goroutine's No-Interrupt Section. Ignored in handler context or while
// holding an HSL outside a section; without a matching HoldInterrupts it is
// an error.
func (j *Job) ResumeInterrupts() error {
	const op = "gasnet_resume_interrupts"
	g := gctx.ID()
	j.nis.mu.Lock()
	h := j.nis.held[g]
	if h != nil {
		delete(j.nis.held, g)
		j.nis.n.Add(-1)
	}
	j.nis.mu.Unlock()
	if h != nil {
		h.Unlock()
		return nil
	}
	if j.c.CheckRestricted(op) != nil {
		return nil
	}
	return newErr(op, ErrCodeBadArg, "no No-Interrupt Section is open on this goroutine (hold and resume must be paired)")
}

// HSL is gasnet_hsl_t (interoperable with gex_HSL_t). The zero value is an
// unlocked lock: `var h gasnet.HSL` is `gasnet_hsl_t h =
// GASNET_HSL_INITIALIZER;`. HSLs are process-wide objects, not tied to a job.
// Misuse the spec calls erroneous (recursive locking, unlocking a lock not
// held, destroying a locked lock) is fatal, as in GASNet: it panics.
type HSL = gex.HSL

// HSLInit implements gasnet_hsl_init.
func HSLInit(h *HSL) { h.Init() }

// HSLDestroy implements gasnet_hsl_destroy.
func HSLDestroy(h *HSL) { h.Destroy() }

// HSLLock implements gasnet_hsl_lock: it blocks until the calling goroutine
// holds h. The only blocking call permitted in a handler.
func HSLLock(h *HSL) { h.Lock() }

// HSLTrylock implements gasnet_hsl_trylock: nil if h was acquired, an error
// wrapping ErrNotReady (GASNET_ERR_NOT_READY) if it is held elsewhere.
func HSLTrylock(h *HSL) error {
	if h.TryLock() {
		return nil
	}
	return ErrNotReady
}

// HSLUnlock implements gasnet_hsl_unlock.
func HSLUnlock(h *HSL) { h.Unlock() }
