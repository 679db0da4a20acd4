package gex_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/launch"
	"github.com/gexgo/gexgo/internal/spmdtest"
)

// Tests of the tcp conduit on this machine: the ranks are split into pretend
// hosts (GEX_HOST), shared memory inside each, TCP on loopback between them.
// (The multi-host tests in network namespaces run the same over veth links.)

// runTCP runs body as an n-rank process job over hosts pretend hosts joined by
// the tcp conduit.
func runTCP(t *testing.T, n, hosts int, o jobOpts, body func(e *rankEnv)) {
	t.Helper()
	if os.Getenv(envConduit) == "loop" {
		t.Skipf("%s=loop: the tcp conduit runs between processes", envConduit)
	}
	o.env = append(o.env, "GEX_CONDUIT=tcp", "GEX_TCP_ADDR=127.0.0.1")
	o.hosts = make([]string, n)
	for r := range o.hosts {
		o.hosts[r] = fmt.Sprint("h", r*hosts/n)
	}
	t.Run("tcp", func(t *testing.T) { runSMP(t, n, o, body) })
}

// TestTCPTopology: two pretend hosts of two ranks form two neighbourhoods;
// segments of the other host are not mapped.
func TestTCPTopology(t *testing.T) { runTCP(t, 4, 2, jobOpts{segSize: 1 << 16}, tcpTopology) }

func tcpTopology(e *rankEnv) {
	nb, _ := e.c.QueryNbrhdInfo()
	if len(nb) != 2 {
		e.Fatalf("neighbourhood of %d ranks, want 2", len(nb))
	}
	for r := gex.Rank(0); r < e.size; r++ {
		bs, ev, err := e.tm.QueryBoundSegmentNB(r, 0)
		e.wait(ev, err, "QueryBoundSegmentNB")
		sameHost := r/2 == e.rank/2
		if (bs.Local != nil) != sameHost {
			e.Fatalf("rank %d's segment mapped = %v, want %v", r, bs.Local != nil, sameHost)
		}
	}
}

// TestTCPAMAndRMA: AMs of every category and RMA of several sizes to every
// rank, across the hosts and inside them.
func TestTCPAMAndRMA(t *testing.T) { runTCP(t, 4, 2, jobOpts{segSize: 1 << 20}, tcpAMAndRMA) }

// TestTCPManyHosts: the same over five pretend hosts of one rank each, so
// that every rank has four connections and polls them through the tcp
// conduit's ready set (internal/conduit/tcp, ready.go) in each wait mode.
func TestTCPManyHosts(t *testing.T) {
	for _, mode := range []gex.WaitMode{gex.WaitSpin, gex.WaitBlock, gex.WaitSpinBlock} {
		t.Run(mode.String(), func(t *testing.T) {
			runTCP(t, 5, 5, jobOpts{segSize: 1 << 20, waitMode: mode}, tcpManyHosts)
		})
	}
}

// tcpManyHosts is tcpAMAndRMA for ranks alone on their hosts.
func tcpManyHosts(e *rankEnv) {
	if nb, _ := e.c.QueryNbrhdInfo(); len(nb) != 1 {
		e.Fatalf("neighbourhood of %d ranks, want 1 (a host per rank)", len(nb))
	}
	tcpAMAndRMA(e)
}

func tcpAMAndRMA(e *rankEnv) {
	var got atomic.Int64
	err := e.ep.RegisterHandlers([]gex.AMEntry{
		{Index: 150, Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 2, Fn: func(tk *gex.Token, p []byte, a []gex.AMArg) {
			if int(a[1]) != len(p) || len(p) > 0 && p[len(p)-1] != byte(a[0]) {
				panic(fmt.Sprintf("medium of %d bytes, arg says %d", len(p), a[1]))
			}
			if err := tk.ReplyShort(151, 0, a[0]); err != nil {
				panic(err)
			}
		}},
		{Index: 151, Flags: gex.FlagAMShort | gex.FlagAMReply, NArgs: 1, Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) { got.Add(1) }},
		// A Long lands in this rank's segment at the slot of its sender
		// before the handler runs, with the sender's pattern.
		{Index: 152, Flags: gex.FlagAMLong | gex.FlagAMRequest, NArgs: 1, Fn: func(tk *gex.Token, p []byte, a []gex.AMArg) {
			slot := e.seg.Bytes()[int(a[0])*2000:][:len(p)]
			if len(p) != 1500 || &p[0] != &slot[0] || p[0] != byte(a[0]+1) || p[len(p)-1] != byte(a[0]+1) {
				panic(fmt.Sprintf("Long from rank %d: %d bytes, not in place or wrong", a[0], len(p)))
			}
			if err := tk.ReplyShort(151, 0, a[0]); err != nil {
				panic(err)
			}
		}},
	})
	e.Check(err, "RegisterHandlers")
	e.Barrier()
	sent := 0
	for r := gex.Rank(0); r < e.size; r++ {
		for _, n := range []int{0, 1, 1000, 60000} {
			p := bytes.Repeat([]byte{byte(r)}, n)
			e.Check(e.tm.RequestMedium(r, 150, p, gex.EventNow, 0, int32(r), int32(n)), "RequestMedium")
			sent++
		}
	}
	e.Check(e.c.BlockUntil(func() bool { return got.Load() == int64(sent) }), "BlockUntil(replies)")
	for r := gex.Rank(0); r < e.size; r++ {
		bs, ev, err := e.tm.QueryBoundSegmentNB(r, 0)
		e.wait(ev, err, "QueryBoundSegmentNB")
		p := bytes.Repeat([]byte{byte(e.rank + 1)}, 1500)
		e.Check(e.tm.RequestLong(r, 152, p, bs.Owner+gex.Addr(int(e.rank)*2000), gex.EventNow, 0, int32(e.rank)), "RequestLong")
		sent++
	}
	e.Check(e.c.BlockUntil(func() bool { return got.Load() == int64(sent) }), "BlockUntil(Long replies)")
	e.Barrier()

	own := e.seg.Bytes()
	for i := range own {
		own[i] = byte(int(e.rank)*7 + i)
	}
	e.Barrier()
	for r := gex.Rank(0); r < e.size; r++ {
		bs, ev, err := e.tm.QueryBoundSegmentNB(r, 0)
		e.wait(ev, err, "QueryBoundSegmentNB")
		for _, n := range []int{8, 4096, 300000} {
			buf := make([]byte, n)
			e.Check(e.tm.GetBlocking(buf, r, bs.Owner+gex.Addr(n), 0), "GetBlocking")
			for i, b := range buf {
				if want := byte(int(r)*7 + n + i); b != want {
					e.Fatalf("get of %d bytes from rank %d: byte %d = %d, want %d", n, r, i, b, want)
				}
			}
		}
	}
	e.Barrier()
	// Every rank puts its rank into its slot of every segment.
	for r := gex.Rank(0); r < e.size; r++ {
		bs, ev, err := e.tm.QueryBoundSegmentNB(r, 0)
		e.wait(ev, err, "QueryBoundSegmentNB")
		e.Check(e.tm.PutBlocking(r, bs.Owner+gex.Addr(8*e.rank), u64s(uint64(e.rank)+100), 0), "PutBlocking")
	}
	e.Barrier()
	for r := 0; r < int(e.size); r++ {
		if v := binary.LittleEndian.Uint64(own[8*r:]); v != uint64(r)+100 {
			e.Fatalf("slot %d = %d, want %d", r, v, r+100)
		}
	}
}

// TestTCPAtomicsAndCollectives: FADDs on one counter from every rank, and
// the collectives, across hosts.
func TestTCPAtomicsAndCollectives(t *testing.T) {
	runTCP(t, 4, 2, jobOpts{segSize: 2 << 20}, tcpAtomicsAndCollectives)
}

func tcpAtomicsAndCollectives(e *rankEnv) {
	ad, err := gex.ADCreate[uint64](e.tm, gex.DTU64, gex.OPFAdd|gex.OPGet, 0)
	e.Check(err, "ADCreate")
	bs, ev, err := e.tm.QueryBoundSegmentNB(0, 0)
	e.wait(ev, err, "QueryBoundSegmentNB")
	const k = 500
	var old uint64
	for i := 0; i < k; i++ {
		ev, err := ad.OpNB(&old, 0, bs.Owner, gex.OPFAdd, 1, 0, 0)
		e.wait(ev, err, "FADD")
	}
	e.collBarrier(e.tm)
	if e.rank == 3 {
		ev, err := ad.OpNB(&old, 0, bs.Owner, gex.OPGet, 0, 0, 0)
		e.wait(ev, err, "GET")
		if old != k*uint64(e.size) {
			e.Fatalf("counter = %d, want %d", old, k*uint64(e.size))
		}
	}
	e.collBarrier(e.tm)
	e.Check(ad.Destroy(), "AD.Destroy")

	for root := gex.Rank(0); root < e.size; root++ {
		want := make([]byte, 1<<20+1)
		bcastPattern(want, root, 9)
		dst := make([]byte, len(want))
		ev, err := e.tm.BroadcastNB(root, dst, want, len(want), 0)
		e.wait(ev, err, "BroadcastNB")
		if !bytes.Equal(dst, want) {
			e.Fatalf("broadcast from %d across hosts: wrong bytes", root)
		}
	}
	dst := make([]byte, 8)
	ev, err = e.tm.ReduceToAllNB(dst, u64s(uint64(e.rank)+1), gex.DTU64, 8, 1, gex.OPAdd, nil, nil, 0)
	e.wait(ev, err, "ReduceToAllNB")
	if got := binary.LittleEndian.Uint64(dst); got != 10 {
		e.Fatalf("sum = %d, want 10", got)
	}
}

// inNetns is spmdtest.Netns: k network-namespace hosts for the job.
func inNetns(t *testing.T, k int) func(*launch.Config) { return spmdtest.Netns(t, k) }

// TestNetns runs the tcp conduit tests across two hosts made of network
// namespaces joined by veth links to a private bridge (internal/netns), two
// ranks per host: shared memory inside a host, TCP over the links between
// them. The bootstrap socket is a path (abstract sockets are per namespace).
func TestNetns(t *testing.T) {
	if os.Getenv(envConduit) == "loop" {
		t.Skipf("%s=loop: the tcp conduit runs between processes", envConduit)
	}
	adjust := inNetns(t, 2)
	for _, tc := range []struct {
		name    string
		n       int
		segSize uint64
		body    func(*rankEnv)
	}{
		{"topology", 4, 2 << 20, tcpTopology},
		{"am-rma", 4, 2 << 20, tcpAMAndRMA},
		{"atomics-collectives", 4, 2 << 20, tcpAtomicsAndCollectives},
		// Suites of the single-host conformance tests, now across hosts.
		{"rma-model", modelRanks, modelRanks * modelZone, rmaModel},
		{"ad-counter", 4, 1 << 16, adCounter},
		{"ad-spinlock", 4, 1 << 16, adSpinLock},
		{"vis-model", 2, 2 * visZone, visModel},
	} {
		o := jobOpts{segSize: tc.segSize, env: []string{"GEX_CONDUIT=tcp"}, launch: adjust}
		t.Run(tc.name, func(t *testing.T) { runSMP(t, tc.n, o, tc.body) })
	}
}

// TestNetnsManyHosts: AMs of every category and RMA among five namespace
// hosts of one rank each: every rank has four connections, which its polls
// serve through the tcp conduit's ready set (internal/conduit/tcp, ready.go),
// in each wait mode.
func TestNetnsManyHosts(t *testing.T) {
	if os.Getenv(envConduit) == "loop" {
		t.Skipf("%s=loop: the tcp conduit runs between processes", envConduit)
	}
	adjust := inNetns(t, 5)
	for _, mode := range []gex.WaitMode{gex.WaitSpin, gex.WaitBlock, gex.WaitSpinBlock} {
		o := jobOpts{segSize: 1 << 20, env: []string{"GEX_CONDUIT=tcp"}, launch: adjust, waitMode: mode}
		t.Run(mode.String(), func(t *testing.T) { runSMP(t, 5, o, tcpManyHosts) })
	}
}

// TestNetnsHostLost: the ranks of one host die (SIGKILL) while the other
// hosts' ranks wait for them in a barrier; the job ends within 5 s with a
// message naming a lost rank (from the launcher, or from a survivor whose
// connection broke), and nothing is left behind (spmdtest checks for
// leftover processes and shared memory). Two hosts of two ranks (one
// connection to each remote rank), and five hosts of one rank, whose
// survivors poll their four connections through the ready set.
func TestNetnsHostLost(t *testing.T) {
	if os.Getenv(envConduit) == "loop" {
		t.Skipf("%s=loop: the tcp conduit runs between processes", envConduit)
	}
	for _, tc := range []struct{ ranks, hosts, firstLost int }{{4, 2, 2}, {5, 5, 4}} {
		t.Run(fmt.Sprintf("%d hosts", tc.hosts), func(t *testing.T) {
			var opts []spmdtest.Option
			var out string
			if adjust := inNetns(t, tc.hosts); adjust != nil {
				opts = append(opts, spmdtest.Env("GEX_CONDUIT=tcp"), spmdtest.ExpectExit(1), spmdtest.Output(&out),
					spmdtest.Timeout(5*time.Second), spmdtest.Launch(adjust))
			}
			spmdtest.Run(t, tc.ranks, func(t *testing.T) {
				_, _, tm, err := gex.ClientInit("HOSTLOST", 0)
				if err != nil {
					t.Fatal(err)
				}
				ev, _ := tm.BarrierNB(0)
				ev.Wait()
				if int(tm.QueryRank()) >= tc.firstLost {
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
				}
				ev, _ = tm.BarrierNB(0) // never completes: the last host is gone
				ev.Wait()
				t.Fatal("the barrier completed without the lost host")
			}, opts...)
			// Either the launcher sees the death first, or a surviving rank
			// sees its connection to the lost host break; both name a lost
			// rank.
			lost := regexp.MustCompile(fmt.Sprintf(`rank [%d-%d] \(pid \d+\) was killed by signal SIGKILL|lost the connection to rank [%d-%d]`,
				tc.firstLost, tc.ranks-1, tc.firstLost, tc.ranks-1))
			if !inRank() && !lost.MatchString(out) {
				t.Fatalf("the job's output does not name a lost rank:\n%s", out)
			}
		})
	}
}
