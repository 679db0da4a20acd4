package gasnet_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/gexgo/gexgo/gasnet"
	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/launch"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

// The conformance suite runs every body as an SPMD job on several conduits,
// as gex's own does: loop (ranks are goroutines; run it under -race), smp
// (the test binary re-executed as real processes), both with
// GASNET_SUPERNODE_MAXSIZE=1 (no segment mapped: the AM paths), tcp between
// pretend hosts on loopback, and tcp between network-namespace hosts.
// GEX_TEST_CONDUIT=loop or =smp selects one family.

const envConduit = "GEX_TEST_CONDUIT"

// env is what a body gets on each node.
type env struct {
	t     testing.TB
	j     *gasnet.Job
	c     *gex.Client
	tm    *gex.TM
	me, n gasnet.Node
	am    bool // no segment is mapped (GASNET_SUPERNODE_MAXSIZE=1)
	segs  []gasnet.SegInfo
	fatal func(msg string)
}

func (e *env) Fatalf(format string, args ...any) {
	e.t.Helper()
	e.fatal(fmt.Sprintf("node %d: ", e.me) + fmt.Sprintf(format, args...))
}

func (e *env) Check(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.Fatalf("%s: %v", what, err)
	}
}

// Want checks that err wraps target and its text mentions each of words.
func (e *env) Want(err, target error, what string, words ...string) {
	e.t.Helper()
	if !errors.Is(err, target) {
		e.Fatalf("%s: got error %v, want one wrapping %v", what, err, target)
	}
	for _, w := range words {
		if !contains(err.Error(), w) {
			e.Fatalf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// Barrier is a GASNet-1 anonymous barrier.
func (e *env) Barrier() {
	e.t.Helper()
	e.Check(e.j.BarrierNotify(0, gasnet.BarrierFlagAnonymous), "barrier notify")
	e.Check(e.j.BarrierWait(0, gasnet.BarrierFlagAnonymous), "barrier wait")
}

// attach attaches and fetches every node's segment information.
func (e *env) attach(table []gasnet.HandlerEntry, segsize uint64) {
	e.t.Helper()
	e.Check(e.j.Attach(table, segsize, 0), "Attach")
	e.segs = make([]gasnet.SegInfo, e.n)
	e.Check(e.j.GetSegmentInfo(e.segs), "GetSegmentInfo")
}

// at is the address off bytes into node's segment.
func (e *env) at(node gasnet.Node, off int) gasnet.Addr { return e.segs[node].Addr + gasnet.Addr(off) }

// mode is one conduit configuration.
type mode struct {
	name      string
	loop      bool
	supernode int
	tcpHosts  int                  // > 0: tcp conduit over that many pretend hosts
	launch    func(*launch.Config) // netns
}

var (
	modeLoop   = mode{name: "loop", loop: true}
	modeLoopAM = mode{name: "loop-am", loop: true, supernode: 1}
	modeSMP    = mode{name: "smp"}
	modeSMPAM  = mode{name: "smp-am", supernode: 1}
	modeTCP    = mode{name: "tcp", tcpHosts: 2}
)

const testEnvVar, testEnvVal = "GASNET1_TEST_VAR", "a value with spaces"

// end ends a node's part of a job: a gex barrier (valid whether or not
// Attach succeeded), then Close.
func (e *env) end() {
	ev, err := e.tm.BarrierNB(0)
	e.Check(err, "final BarrierNB")
	e.Check(ev.Wait(), "final barrier")
	e.Check(e.c.Close(), "Close")
}

// run runs body as an n-node job in mode m.
func run(t *testing.T, n int, m mode, body func(e *env)) {
	t.Helper()
	sel := os.Getenv(envConduit)
	if sel != "" && sel != "loop" && sel != "smp" {
		t.Fatalf("%s=%q: want loop, smp or unset", envConduit, sel)
	}
	if m.loop {
		if sel == "smp" || spmdtest.InRank() {
			return
		}
		t.Run(fmt.Sprintf("%s-%d", m.name, n), func(t *testing.T) { runLoop(t, n, m, body) })
		return
	}
	if sel == "loop" {
		return
	}
	t.Run(fmt.Sprintf("%s-%d", m.name, n), func(t *testing.T) { runProcs(t, n, m, body) })
}

func runLoop(t *testing.T, n int, m mode, body func(e *env)) {
	t.Setenv(testEnvVar, testEnvVal)
	lj, err := gex.NewLoopJob(gex.LoopConfig{Size: n, SupernodeMaxSize: m.supernode})
	if err != nil {
		t.Fatal(err)
	}
	lj.Run(func(rank int) {
		c, ep, tm, err := lj.ClientInit(rank, "GASNET1_TEST", gex.FlagUsesGASNet1)
		if err != nil {
			t.Errorf("rank %d: ClientInit: %v", rank, err)
			return
		}
		j, err := gasnet.New(c, ep, tm)
		if err != nil {
			t.Errorf("rank %d: gasnet.New: %v", rank, err)
			return
		}
		e := &env{t: t, j: j, c: c, tm: tm, me: j.Mynode(), n: j.Nodes(), am: m.supernode == 1}
		e.fatal = func(msg string) {
			t.Error(msg)
			c.Exit(1)
		}
		body(e)
		e.end()
	})
	if code, exited := lj.ExitCode(); exited && code != 0 && !t.Failed() {
		t.Fatalf("loop job exited with code %d", code)
	}
	runtime.GC()
}

func runProcs(t *testing.T, n int, m mode, body func(e *env)) {
	opts := []spmdtest.Option{spmdtest.Env(testEnvVar + "=" + testEnvVal)}
	if m.supernode > 0 {
		opts = append(opts, spmdtest.Env("GASNET_SUPERNODE_MAXSIZE="+strconv.Itoa(m.supernode)))
	}
	if m.tcpHosts > 0 {
		opts = append(opts, spmdtest.Env("GEX_CONDUIT=tcp", "GEX_TCP_ADDR=127.0.0.1"), spmdtest.PretendHosts(m.tcpHosts))
	}
	if m.launch != nil {
		opts = append(opts, spmdtest.Env("GEX_CONDUIT=tcp"), spmdtest.Launch(m.launch))
	}
	spmdtest.Run(t, n, func(t *testing.T) {
		j, err := gasnet.Init()
		if err != nil {
			t.Fatalf("Init: %v", err)
		}
		c, _, tm, _ := j.QueryGexObjects()
		e := &env{t: t, j: j, c: c, tm: tm, me: j.Mynode(), n: j.Nodes(), am: m.supernode == 1}
		e.fatal = func(msg string) { t.Fatal(msg) }
		body(e)
		e.end()
	}, opts...)
}

// inNetns is spmdtest.Netns: k network-namespace hosts for the job.
func inNetns(t *testing.T, k int) func(*launch.Config) { return spmdtest.Netns(t, k) }
