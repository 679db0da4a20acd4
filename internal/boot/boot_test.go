package boot_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/boot"
	"github.com/gexgo/gexgo/internal/boot/bootwire"
	"github.com/gexgo/gexgo/internal/launch"
)

// exitRecorder stands in for os.Exit in in-process ranks.
type exitRecorder struct {
	mu    sync.Mutex
	codes []int
	out   bytes.Buffer // the rank's stderr
	done  chan struct{}
}

func newExitRecorder() *exitRecorder { return &exitRecorder{done: make(chan struct{})} }

func (e *exitRecorder) exit(code int) {
	e.mu.Lock()
	e.codes = append(e.codes, code)
	e.mu.Unlock()
	close(e.done)
}

func (e *exitRecorder) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.out.Write(p)
}

// wait returns the exit codes and the stderr text once exit was called.
func (e *exitRecorder) wait(t *testing.T) ([]int, string) {
	t.Helper()
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the rank did not exit")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]int(nil), e.codes...), e.out.String()
}

func TestSingleton(t *testing.T) {
	rec := newExitRecorder()
	b := boot.SingletonForTest("hostA", rec.exit, rec)
	if b.Rank() != 0 || b.Size() != 1 || b.Host() != "hostA" || b.JobID() != "s"+strconv.Itoa(os.Getpid()) {
		t.Errorf("Rank %d Size %d Host %q JobID %q", b.Rank(), b.Size(), b.Host(), b.JobID())
	}
	mine := []byte("mine")
	all, err := b.AllGather(mine)
	if err != nil || len(all) != 1 || string(all[0]) != "mine" {
		t.Fatalf("AllGather = %q, %v", all, err)
	}
	mine[0] = 'X'
	if string(all[0]) != "mine" {
		t.Errorf("AllGather result aliases the contribution")
	}
	if err := b.Barrier(); err != nil {
		t.Errorf("Barrier: %v", err)
	}
	var order []int
	b.OnExit(func() { order = append(order, 1) })
	b.OnExit(func() { panic("hook 2 fails") })
	b.OnExit(func() { order = append(order, 3) })
	go b.Exit(4)
	codes, out := rec.wait(t)
	if len(codes) != 1 || codes[0] != 4 {
		t.Errorf("exit codes %v, want [4]", codes)
	}
	if fmt.Sprint(order) != "[3 1]" {
		t.Errorf("hooks ran in order %v, want [3 1] (reverse of registration, past a panic)", order)
	}
	if !strings.Contains(out, "gexgo: rank 0: OnExit hook panicked: hook 2 fails") {
		t.Errorf("stderr %q does not report the panicking hook", out)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AllGather(nil); !errors.Is(err, boot.ErrClosed) {
		t.Errorf("AllGather after Close: %v, want ErrClosed", err)
	}
	if err := b.Barrier(); !errors.Is(err, boot.ErrClosed) {
		t.Errorf("Barrier after Close: %v, want ErrClosed", err)
	}
}

func TestSingletonAbort(t *testing.T) {
	rec := newExitRecorder()
	b := boot.SingletonForTest("h", rec.exit, rec)
	ran := false
	b.OnExit(func() { ran = true })
	go b.Abort("out of memory")
	codes, out := rec.wait(t)
	if len(codes) != 1 || codes[0] != 1 || !ran {
		t.Errorf("exit codes %v, hook ran %v; want [1], true", codes, ran)
	}
	if out != "gexgo: rank 0 aborted: out of memory\n" {
		t.Errorf("stderr %q", out)
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(boot.EnvBoot, "")
	t.Setenv(boot.EnvHost, "pretend-h3")
	b, err := boot.FromEnv()
	if err != nil || b.Size() != 1 || b.Host() != "pretend-h3" {
		t.Fatalf("FromEnv without GEX_BOOT = %v, %v; want a singleton on pretend-h3", b, err)
	}
	t.Setenv(boot.EnvBoot, "@nowhere")
	t.Setenv(boot.EnvRank, "x")
	if _, err := boot.FromEnv(); err == nil || !strings.Contains(err.Error(), `GEX_RANK="x" is not a non-negative integer`) {
		t.Errorf("FromEnv with a bad GEX_RANK: %v", err)
	}
}

// job is an in-process job: a launch.Server and ranks as goroutines.
type job struct {
	t      *testing.T
	id     string
	srv    *launch.Server
	events chan launch.Event // copies of the server's events
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newJob(t *testing.T, size int) *job {
	j := &job{t: t, id: launch.NewJobID(), events: make(chan launch.Event, 100), stop: make(chan struct{})}
	srv, err := launch.Listen(j.id, size)
	if err != nil {
		t.Fatal(err)
	}
	j.srv = srv
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		for {
			select {
			case ev := <-srv.Events():
				j.events <- ev
			case <-j.stop:
				return
			}
		}
	}()
	t.Cleanup(j.close)
	return j
}

func (j *job) close() {
	select {
	case <-j.stop:
		return
	default:
	}
	close(j.stop)
	j.srv.Close()
	j.wg.Wait()
}

func (j *job) connect(rank, size int, rec *exitRecorder) (boot.Bootstrap, error) {
	return boot.ConnectForTest(j.srv.Addr(), rank, size, j.id, "host", time.Second, rec.exit, rec)
}

func (j *job) event(t *testing.T) launch.Event {
	t.Helper()
	select {
	case ev := <-j.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event from the server")
	}
	panic("unreachable")
}

// connectAll connects ranks 0..size-1 of a job of size concurrently.
func (j *job) connectAll(size int) ([]boot.Bootstrap, []*exitRecorder) {
	j.t.Helper()
	return j.connectAllOf(size, size)
}

// connectAllOf connects ranks 0..n-1 of a job of size concurrently.
func (j *job) connectAllOf(n, size int) ([]boot.Bootstrap, []*exitRecorder) {
	j.t.Helper()
	bs := make([]boot.Bootstrap, n)
	recs := make([]*exitRecorder, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range bs {
		recs[r] = newExitRecorder()
		wg.Add(1)
		go func() {
			defer wg.Done()
			bs[r], errs[r] = j.connect(r, size, recs[r])
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			j.t.Fatalf("rank %d: %v", r, err)
		}
	}
	return bs, recs
}

// contribution is rank r's data in round i: sizes differ by rank and round,
// 0 bytes included.
func contribution(r, i int) []byte {
	n := (r * 37 * (i + 1)) % 9000
	if r == 3 && i == 2 {
		n = 300000
	}
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(r*31 + i + k)
	}
	return b
}

func TestConnectAllGather(t *testing.T) {
	const size, rounds = 4, 6
	j := newJob(t, size)
	bs, _ := j.connectAll(size)
	var wg sync.WaitGroup
	errs := make([]error, size)
	for r, b := range bs {
		if b.Rank() != r || b.Size() != size || b.JobID() != j.id || b.Host() != "host" {
			t.Errorf("rank %d: Rank %d Size %d JobID %q Host %q", r, b.Rank(), b.Size(), b.JobID(), b.Host())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				if i%2 == 1 {
					if err := b.Barrier(); err != nil {
						errs[r] = fmt.Errorf("barrier in round %d: %w", i, err)
						return
					}
				}
				all, err := b.AllGather(contribution(r, i))
				if err != nil {
					errs[r] = fmt.Errorf("round %d: %w", i, err)
					return
				}
				if len(all) != size {
					errs[r] = fmt.Errorf("round %d: %d parts", i, len(all))
					return
				}
				for q := range all {
					if !bytes.Equal(all[q], contribution(q, i)) {
						errs[r] = fmt.Errorf("round %d: part %d is %d bytes, want %d", i, q, len(all[q]), len(contribution(q, i)))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	for _, b := range bs {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		if _, err := b.AllGather(nil); !errors.Is(err, boot.ErrClosed) {
			t.Errorf("AllGather after Close: %v, want ErrClosed", err)
		}
	}
}

func TestBarrierWaitsForAll(t *testing.T) {
	j := newJob(t, 3)
	bs, _ := j.connectAll(3)
	entered := make(chan int, 3)
	left := make(chan int, 3)
	for r := 0; r < 2; r++ {
		go func() {
			entered <- r
			bs[r].Barrier()
			left <- r
		}()
	}
	<-entered
	<-entered
	select {
	case r := <-left:
		t.Fatalf("rank %d left the barrier before rank 2 entered it", r)
	case <-time.After(100 * time.Millisecond):
	}
	if err := bs[2].Barrier(); err != nil {
		t.Fatal(err)
	}
	<-left
	<-left
	for _, b := range bs {
		b.Close()
	}
}

func TestConnectRejected(t *testing.T) {
	j := newJob(t, 4)
	first, err := j.connect(1, 4, newExitRecorder())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()

	cases := []struct {
		rank, size int
		want       string
	}{
		{1, 4, "rank 1 is already connected (pid "},
		{2, 3, "HELLO says the job has 3 ranks, the launcher started 4"},
	}
	for _, c := range cases {
		_, err := j.connect(c.rank, c.size, newExitRecorder())
		if err == nil || !strings.Contains(err.Error(), "rejected the connection: "+c.want) {
			t.Errorf("Connect(rank %d, size %d): %v; want a rejection containing %q", c.rank, c.size, err, c.want)
		}
		ev := j.event(t)
		if ev.Kind != launch.EventDropped || !strings.Contains(ev.Msg, c.want) {
			t.Errorf("server event %+v, want dropped: %q", ev, c.want)
		}
	}
	// After a rank's connection ends, the rank may connect again.
	first.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		again, err := j.connect(1, 4, newExitRecorder())
		if err == nil {
			again.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reconnecting rank 1: %v", err)
		}
		j.event(t) // the rejection while the old connection was still registered
	}
}

func TestConnectArgErrors(t *testing.T) {
	rec := newExitRecorder()
	cases := []struct {
		addr       string
		rank, size int
		jobID      string
		want       string
	}{
		{"@x", -1, 4, "j", "rank -1 is out of range [0, 4)"},
		{"@x", 4, 4, "j", "rank 4 is out of range [0, 4)"},
		{"@x", 0, 0, "j", "size 0 is out of range [1, 2147483648]"},
		{"@x", 0, 1, "", `jobID "" must be 1 to 64 characters`},
		{"@x", 0, 1, "a b", `jobID "a b" must be`},
		{"", 0, 1, "j", "addr is empty"},
		{"@gexgo-nonexistent-" + launch.NewJobID(), 0, 1, "j", "rank 0: cannot connect to the launcher at @gexgo-nonexistent-"},
	}
	for _, c := range cases {
		b, err := boot.ConnectForTest(c.addr, c.rank, c.size, c.jobID, "h", 100*time.Millisecond, rec.exit, rec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Connect(%q, %d, %d, %q) = %v, %v; want an error containing %q", c.addr, c.rank, c.size, c.jobID, b, err, c.want)
		}
	}
}

func TestExitEndsEveryRank(t *testing.T) {
	const size = 3
	j := newJob(t, size+1) // rank 3 connects after the exit
	bs, recs := j.connectAllOf(size, size+1)
	hooks := make([]bool, size)
	for r, b := range bs {
		b.OnExit(func() { hooks[r] = true })
	}
	// Ranks 1 and 2 wait in a barrier that rank 0 never joins.
	barrierErr := make(chan error, size)
	for r := 1; r < size; r++ {
		go func() { barrierErr <- bs[r].Barrier() }()
	}
	go bs[0].Exit(7)
	if ev := j.event(t); ev.Kind != launch.EventExit || ev.Rank != 0 || ev.Code != 7 {
		t.Errorf("server event %+v, want exit of rank 0 with 7", ev)
	}
	for r, rec := range recs {
		codes, out := rec.wait(t)
		if len(codes) != 1 || codes[0] != 7 || out != "" {
			t.Errorf("rank %d: exit codes %v, stderr %q; want [7] and nothing", r, codes, out)
		}
		if !hooks[r] {
			t.Errorf("rank %d: hook did not run", r)
		}
	}
	for r := 1; r < size; r++ {
		if err := <-barrierErr; err == nil {
			t.Errorf("a barrier completed without rank 0")
		}
	}
	// A rank connecting after the EXIT is told to exit at once.
	late := newExitRecorder()
	go j.connect(size, size+1, late)
	if codes, _ := late.wait(t); len(codes) != 1 || codes[0] != 7 {
		t.Errorf("late rank: exit codes %v, want [7]", codes)
	}
}

func TestAbortAcknowledged(t *testing.T) {
	j := newJob(t, 2)
	bs, recs := j.connectAll(2)
	go bs[1].Abort("disk on fire")
	ev := j.event(t)
	if ev.Kind != launch.EventAbort || ev.Rank != 1 || ev.Msg != "disk on fire" {
		t.Errorf("server event %+v, want abort of rank 1", ev)
	}
	codes, out := recs[1].wait(t)
	if len(codes) != 1 || codes[0] != 1 || out != "" {
		t.Errorf("exit codes %v, stderr %q; want [1] and nothing (the launcher printed it)", codes, out)
	}
	bs[0].Close()
}

func TestLauncherLost(t *testing.T) {
	j := newJob(t, 2)
	bs, recs := j.connectAll(2)
	ran := make([]bool, 2)
	for r, b := range bs {
		b.OnExit(func() { ran[r] = true })
	}
	j.close()
	for r, rec := range recs {
		codes, out := rec.wait(t)
		if want := fmt.Sprintf("gexgo: rank %d: launcher connection lost; exiting\n", r); len(codes) != 1 || codes[0] != 1 || out != want {
			t.Errorf("rank %d: exit codes %v, stderr %q; want [1], %q", r, codes, out, want)
		}
		if !ran[r] {
			t.Errorf("rank %d: hook did not run", r)
		}
	}
}

func TestExitWithoutLauncher(t *testing.T) {
	// Exit after Close cannot reach the launcher: it exits at once.
	j := newJob(t, 1)
	bs, recs := j.connectAll(1)
	bs[0].Close()
	start := time.Now()
	go bs[0].Exit(3)
	if codes, _ := recs[0].wait(t); len(codes) != 1 || codes[0] != 3 {
		t.Errorf("exit codes %v, want [3]", codes)
	}
	if d := time.Since(start); d > boot.ExitAckTimeout+5*time.Second {
		t.Errorf("Exit took %v", d)
	}
}

func TestAllGatherLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates about 300 MB")
	}
	j := newJob(t, 2)
	bs, _ := j.connectAll(2)
	tooBig := make([]byte, bootwire.MaxFrame)
	if _, err := bs[0].AllGather(tooBig); err == nil || !strings.Contains(err.Error(), "exceeds the limit of 67108859 bytes") {
		t.Errorf("AllGather of MaxFrame bytes: %v", err)
	}
	// Each contribution fits, the result does not: every rank gets the error.
	half := tooBig[:40<<20]
	errs := make(chan error, 2)
	for _, b := range bs {
		go func() {
			_, err := b.AllGather(half)
			errs <- err
		}()
	}
	for range bs {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "exceeds the bootstrap frame limit") {
			t.Errorf("AllGather with an oversize result: %v", err)
		}
	}
	// The job goes on.
	for _, b := range bs {
		go func() { errs <- b.Barrier() }()
	}
	for range bs {
		if err := <-errs; err != nil {
			t.Errorf("Barrier after a failed all-gather: %v", err)
		}
	}
	for _, b := range bs {
		b.Close()
	}
}
