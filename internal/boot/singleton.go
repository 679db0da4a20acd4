package boot

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
)

// Singleton returns the Bootstrap of a job of one rank, for a program started
// without a launcher: rank 0 of 1 on host, JobID "s<pid>". AllGather returns
// a copy of the caller's contribution, Barrier returns at once, Exit runs the
// OnExit hooks and exits with the code, Abort prints "gexgo: rank 0 aborted:
// msg" to stderr, runs the hooks and exits 1.
func Singleton(host string) Bootstrap {
	return newSingleton(host, os.Exit, os.Stderr)
}

func newSingleton(host string, exit func(int), stderr io.Writer) *singleton {
	return &singleton{host: host, jobID: "s" + strconv.Itoa(os.Getpid()), exit: exit, stderr: stderr}
}

// singleton is the Bootstrap of a one-rank job. Its fields after construction
// are guarded by mu.
type singleton struct {
	host, jobID string
	exit        func(int)
	stderr      io.Writer

	mu      sync.Mutex
	hooks   []func()
	closed  bool
	endOnce sync.Once
}

func (s *singleton) Rank() int     { return 0 }
func (s *singleton) Size() int     { return 1 }
func (s *singleton) JobID() string { return s.jobID }
func (s *singleton) Host() string  { return s.host }

func (s *singleton) AllGather(mine []byte) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return [][]byte{bytes.Clone(mine)}, nil
}

func (s *singleton) Barrier() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *singleton) OnExit(fn func()) {
	s.mu.Lock()
	s.hooks = append(s.hooks, fn)
	s.mu.Unlock()
}

func (s *singleton) Exit(code int) { s.end(code) }

func (s *singleton) Abort(msg string) {
	fmt.Fprintf(s.stderr, "gexgo: rank 0 aborted: %s\n", msg)
	s.end(1)
}

func (s *singleton) end(code int) {
	s.endOnce.Do(func() {
		s.mu.Lock()
		hooks := s.hooks
		s.hooks = nil
		s.mu.Unlock()
		runHooks(hooks, 0, s.stderr)
		s.exit(code)
	})
	runtime.Goexit()
}

func (s *singleton) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}
