// Package loop runs a job's ranks as goroutines of one process: the smp engine
// over Go heap memory (shm.Heap) with an in-process bootstrap. It exists so the
// same conformance tests that run on real processes also run under
// `go test -race`, which then sees the lock-free queues and every hand-off.
package loop

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/conduit/smp"
	"github.com/gexgo/gexgo/internal/shm"
)

// Config describes an in-process job.
type Config struct {
	Size int
	// Hosts optionally gives each rank a pretend host identity (len == Size).
	Hosts []string
	// SupernodeMaxSize and MaxSegSize as in smp.Config.
	SupernodeMaxSize int
	MaxSegSize       string
	// NoDuo as in smp.Config; NoDuoFor, if set, per rank instead.
	NoDuo    bool
	NoDuoFor []bool
	// CPUs as in smp.Config (0: the machine's).
	CPUs int
}

// Job is an in-process job of Size ranks.
type Job struct {
	cfg   Config
	heap  *shm.Heap
	id    string
	mu    sync.Mutex
	round *round
	hooks [][]func()

	exited   chan struct{}
	exitOnce sync.Once
	code     atomic.Int64
	abortMsg atomic.Pointer[string]
}

type round struct {
	data    [][]byte
	arrived int
	done    chan struct{}
}

var jobSeq atomic.Uint64

// NewJob creates a job. Each rank goroutine then calls Conduit(rank).
func NewJob(cfg Config) (*Job, error) {
	if cfg.Size < 1 {
		return nil, fmt.Errorf("loop: Size %d must be at least 1", cfg.Size)
	}
	if cfg.Hosts != nil && len(cfg.Hosts) != cfg.Size {
		return nil, fmt.Errorf("loop: %d Hosts given for Size %d", len(cfg.Hosts), cfg.Size)
	}
	j := &Job{cfg: cfg, heap: shm.NewHeap(), hooks: make([][]func(), cfg.Size), exited: make(chan struct{})}
	j.id = "loop" + strconv.FormatUint(jobSeq.Add(1), 10)
	j.round = &round{data: make([][]byte, cfg.Size), done: make(chan struct{})}
	return j, nil
}

// Size is the number of ranks.
func (j *Job) Size() int { return j.cfg.Size }

// Conduit sets up rank's conduit; collective over the job's ranks (each
// calls it from its own goroutine).
func (j *Job) Conduit(rank int) (*smp.Conduit, error) {
	if rank < 0 || rank >= j.cfg.Size {
		return nil, fmt.Errorf("loop: rank %d out of range [0, %d)", rank, j.cfg.Size)
	}
	noDuo := j.cfg.NoDuo
	if j.cfg.NoDuoFor != nil {
		noDuo = j.cfg.NoDuoFor[rank]
	}
	return smp.New(&rankBoot{j: j, rank: rank}, smp.Config{Allocator: j.heap, SupernodeMaxSize: j.cfg.SupernodeMaxSize, MaxSegSize: j.cfg.MaxSegSize, NoDuo: noDuo, CPUs: j.cfg.CPUs, Done: j.exited})
}

// Exited reports whether a rank called Exit or Abort, and with what code.
func (j *Job) Exited() (code int, exited bool) {
	select {
	case <-j.exited:
		return int(j.code.Load()), true
	default:
		return 0, false
	}
}

// Done is closed when a rank calls Exit or Abort.
func (j *Job) Done() <-chan struct{} { return j.exited }

// AbortMessage is the message of the first Abort, if any.
func (j *Job) AbortMessage() string {
	if p := j.abortMsg.Load(); p != nil {
		return *p
	}
	return ""
}

func (j *Job) allGather(rank int, mine []byte) ([][]byte, error) {
	j.mu.Lock()
	r := j.round
	r.data[rank] = append([]byte(nil), mine...)
	r.arrived++
	if r.arrived == j.cfg.Size {
		j.round = &round{data: make([][]byte, j.cfg.Size), done: make(chan struct{})}
		close(r.done)
	}
	j.mu.Unlock()
	select {
	case <-r.done:
	case <-j.exited:
		runtime.Goexit()
	}
	out := make([][]byte, len(r.data))
	for i, d := range r.data {
		out[i] = append([]byte(nil), d...)
	}
	return out, nil
}

func (j *Job) end(rank, code int) {
	j.exitOnce.Do(func() {
		j.code.Store(int64(code))
		close(j.exited)
	})
	j.mu.Lock()
	hooks := j.hooks[rank]
	j.hooks[rank] = nil
	j.mu.Unlock()
	for _, fn := range hooks {
		fn()
	}
	runtime.Goexit()
}

// rankBoot is the boot.Bootstrap of one in-process rank.
type rankBoot struct {
	j    *Job
	rank int
}

var _ boot.Bootstrap = (*rankBoot)(nil)

func (b *rankBoot) Rank() int     { return b.rank }
func (b *rankBoot) Size() int     { return b.j.cfg.Size }
func (b *rankBoot) JobID() string { return b.j.id }
func (b *rankBoot) Host() string {
	if b.j.cfg.Hosts != nil {
		return b.j.cfg.Hosts[b.rank]
	}
	return "loop"
}
func (b *rankBoot) AllGather(mine []byte) ([][]byte, error) { return b.j.allGather(b.rank, mine) }
func (b *rankBoot) Barrier() error {
	_, err := b.j.allGather(b.rank, nil)
	return err
}

// Exit ends the job with code: the calling goroutine exits (runtime.Goexit)
// and other ranks leave their next bootstrap collective.
func (b *rankBoot) Exit(code int) { b.j.end(b.rank, code) }

// Abort records msg and ends the job with code 1.
func (b *rankBoot) Abort(msg string) {
	m := fmt.Sprintf("rank %d aborted: %s", b.rank, msg)
	b.j.abortMsg.CompareAndSwap(nil, &m)
	b.j.end(b.rank, 1)
}

func (b *rankBoot) OnExit(fn func()) {
	b.j.mu.Lock()
	b.j.hooks[b.rank] = append(b.j.hooks[b.rank], fn)
	b.j.mu.Unlock()
}

func (b *rankBoot) Close() error { return nil }
