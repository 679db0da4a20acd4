// Command ptlbench measures the Portals 4.3 engine (package portals) between two processes,
// beside gexgo's own GASNet-EX AM Short round trip measured in the same run and the same
// processes (gex and portals share them):
//
//	ptlbench                 # starts itself as 2 ranks on this host (shared memory)
//	ptlbench -netns          # 2 ranks on two network-namespace hosts (TCP; needs root)
//	gexrun -n 2 ptlbench     # under the launcher (any spawner)
//
// It reports: the AM Short round trip (gex), the Portals ping-pong round trip of an 8-byte
// put with a non-matching LE and a counting event (LE+CT) and with a matching ME and an
// event queue (ME+EQ), and the message rate of 8-byte puts with 1, 16 and 128 puts in flight
// (each with a counting ack; the target makes no Portals call while it runs: its NIC alone
// receives and acknowledges). Rank 0 prints; the numbers are of a shared, possibly loaded
// machine: compare them with the reference of the same run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/gexgo/gexgo/gex"
	"github.com/gexgo/gexgo/internal/launch"
	"github.com/gexgo/gexgo/internal/netns"
	"github.com/gexgo/gexgo/portals"
)

var (
	iters  = flag.Int("iters", 20000, "round trips per ping-pong measurement")
	msgs   = flag.Int("msgs", 300000, "puts per message-rate measurement")
	reps   = flag.Int("reps", 3, "repetitions of each measurement (the best is reported)")
	useNS  = flag.Bool("netns", false, "run the 2 ranks on two network-namespace hosts (TCP between them; needs root)")
	csvOut = flag.Bool("csv", false, "print rows bench,path,metric,value,unit")
	cpuOut = flag.String("cpuprofile", "", "write rank 0's CPU profile of the message-rate measurements to this file (rank 1's, the target's, to this file + \".target\")")
	ppOut  = flag.String("pingprofile", "", "write rank 0's CPU profile of the ping-pongs to this file (rank 1's to this file + \".target\")")
)

func main() {
	flag.Parse()
	if os.Getenv("GEX_RANK") == "" && os.Getenv("PMI_FD") == "" && os.Getenv("PMI_PORT") == "" {
		os.Exit(launchSelf())
	}
	if err := rank(); err != nil {
		fmt.Fprintln(os.Stderr, "ptlbench:", err)
		os.Exit(1)
	}
}

// launchSelf starts this program as the 2 ranks of a job, on this host or on two
// network-namespace hosts.
func launchSelf() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ptlbench:", err)
		return 1
	}
	cfg := launch.Config{N: 2, Program: exe, Args: os.Args[1:], Timeout: 10 * time.Minute}
	if *useNS {
		n, err := netns.Setup(2)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ptlbench: -netns:", err)
			return 1
		}
		defer n.Close()
		dir, _ := os.MkdirTemp("", "ptlbench")
		defer os.RemoveAll(dir)
		cfg.SocketDir = dir
		cfg.Env = []string{"GEX_CONDUIT=tcp"}
		cfg.Wrap = func(r int) ([]string, []string) {
			return n.Exec(r), []string{"GEX_HOST=" + n.Hosts[r].NS, "GEX_TCP_ADDR=" + n.Hosts[r].Addr}
		}
	}
	code, err := launch.Run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ptlbench:", err)
	}
	return code
}

const (
	hID gex.AMIndex = 200 + iota
	hReq
	hRep
	hDone
)

func rank() error {
	c, ep, tm, err := gex.ClientInit("PTLBENCH", 0)
	if err != nil {
		return err
	}
	me, n := tm.QueryRank(), tm.QuerySize()
	if n != 2 {
		return fmt.Errorf("needs 2 ranks, has %d", n)
	}
	peer := 1 - me
	var ids [2]portals.ProcessID
	var gotID, replies, done atomic.Int64
	err = ep.RegisterHandlers([]gex.AMEntry{
		{Index: hID, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 3, Name: "id", Fn: func(_ *gex.Token, _ []byte, a []gex.AMArg) {
			ids[a[0]] = portals.Phys(portals.NID(uint32(a[1])), portals.PID(uint32(a[2])))
			gotID.Add(1)
		}},
		{Index: hReq, Flags: gex.FlagAMShort | gex.FlagAMRequest, Name: "req", Fn: func(t *gex.Token, _ []byte, _ []gex.AMArg) { t.ReplyShort(hRep, 0) }},
		{Index: hRep, Flags: gex.FlagAMShort | gex.FlagAMReply, Name: "rep", Fn: func(*gex.Token, []byte, []gex.AMArg) { replies.Add(1) }},
		{Index: hDone, Flags: gex.FlagAMShort | gex.FlagAMRequest, Name: "done", Fn: func(*gex.Token, []byte, []gex.AMArg) { done.Add(1) }},
	})
	if err != nil {
		return err
	}
	barrier := func() error {
		ev, err := tm.BarrierNB(0)
		if err != nil {
			return err
		}
		return ev.Wait()
	}
	out := &report{csv: *csvOut}

	// gex AM Short round trip, as gexbench am / amping
	if err := barrier(); err != nil {
		return err
	}
	if me == 0 {
		best := time.Duration(1 << 62)
		for r := 0; r < *reps; r++ {
			d, err := timeIt(*iters, func() error {
				want := replies.Load() + 1
				if err := tm.RequestShort(gex.Rank(peer), hReq, 0); err != nil {
					return err
				}
				return c.BlockUntil(func() bool { return replies.Load() >= want })
			})
			if err != nil {
				return err
			}
			best = min(best, d)
		}
		out.lat("gex AM Short round trip", best)
		if err := tm.RequestShort(gex.Rank(peer), hDone, 0); err != nil {
			return err
		}
	} else if err := c.BlockUntil(func() bool { return done.Load() > 0 }); err != nil {
		return err
	}

	// Portals: NIs, the map through gex AMs (gex and portals in one process)
	if err := portals.Init(); err != nil {
		return err
	}
	defer portals.Fini()
	nonm, _, err := portals.NIInit(0, portals.NINoMatching|portals.NILogical, portals.PIDAny, nil)
	if err != nil {
		return err
	}
	match, _, err := portals.NIInit(0, portals.NIMatching|portals.NILogical, portals.PIDAny, nil)
	if err != nil {
		return err
	}
	my, _ := nonm.PhysID()
	ids[me] = my
	if err := tm.RequestShort(gex.Rank(peer), hID, 0, gex.AMArg(me), gex.AMArg(int32(my.NID)), gex.AMArg(int32(my.PID))); err != nil {
		return err
	}
	if err := c.BlockUntil(func() bool { return gotID.Load() > 0 }); err != nil {
		return err
	}
	if err := nonm.SetMap(ids[:]); err != nil {
		return err
	}
	if err := match.SetMap(ids[:]); err != nil {
		return err
	}
	if me == 0 {
		out.path = pathOf(ids)
	}
	other := portals.RankID(portals.Rank(peer))
	stopPP, err := startProfile(*ppOut, me)
	if err != nil {
		return err
	}

	// LE + CT ping-pong
	{
		ct, _ := nonm.CTAlloc()
		pt, _ := nonm.PTAlloc(0, portals.EQNone, 0)
		if _, err := nonm.LEAppend(pt, &portals.LE{Buf: make([]byte, 8), UID: portals.UIDAny, CT: ct,
			Options: portals.OpPut | portals.EventCTComm | portals.EventLinkDisable}, portals.PriorityList, 0); err != nil {
			return err
		}
		md, _ := nonm.MDBind(portals.MD{Buf: make([]byte, 8)})
		if err := barrier(); err != nil {
			return err
		}
		var seen uint64
		d, err := pingPong(int(me), *iters, *reps, func() error {
			return portals.Put(md, 0, 8, portals.NoAckReq, other, pt, 0, 0, 0, 0)
		}, func() error {
			seen++
			_, err := ct.Wait(seen)
			return err
		})
		if err != nil {
			return err
		}
		if me == 0 {
			out.lat("portals ping-pong LE+CT", d)
		}
	}
	// ME + EQ ping-pong
	{
		q, _ := match.EQAlloc(1024)
		pt, _ := match.PTAlloc(0, q, 0)
		if _, err := match.MEAppend(pt, &portals.ME{Buf: make([]byte, 8), UID: portals.UIDAny,
			Options: portals.OpPut | portals.EventLinkDisable, MatchID: portals.RankID(portals.RankAny), MatchBits: 42}, portals.PriorityList, 0); err != nil {
			return err
		}
		md, _ := match.MDBind(portals.MD{Buf: make([]byte, 8)})
		if err := barrier(); err != nil {
			return err
		}
		d, err := pingPong(int(me), *iters, *reps, func() error {
			return portals.Put(md, 0, 8, portals.NoAckReq, other, pt, 42, 0, 0, 0)
		}, func() error {
			ev, err := q.Wait()
			if err == nil && ev.Type != portals.EventPut {
				err = fmt.Errorf("event %v", ev.Type)
			}
			return err
		})
		if err != nil {
			return err
		}
		if me == 0 {
			out.lat("portals ping-pong ME+EQ", d)
		}
	}
	stopPP()
	// message rate: 8-byte puts with W in flight, counted acks; the target is passive
	{
		pt, _ := nonm.PTAlloc(0, portals.EQNone, 1)
		if _, err := nonm.LEAppend(pt, &portals.LE{Buf: make([]byte, 8), UID: portals.UIDAny,
			Options: portals.OpPut | portals.EventLinkDisable}, portals.PriorityList, 0); err != nil {
			return err
		}
		ct, _ := nonm.CTAlloc()
		md, _ := nonm.MDBind(portals.MD{Buf: make([]byte, 8), CT: ct, Options: portals.MDEventCTAck})
		if err := barrier(); err != nil {
			return err
		}
		stop, err := startProfile(*cpuOut, me)
		if err != nil {
			return err
		}
		defer stop()
		for _, w := range []uint64{1, 16, 128} {
			if me == 0 {
				best := time.Duration(1 << 62)
				for r := 0; r < *reps; r++ {
					base, _ := ct.Get()
					d, err := timeIt(1, func() error {
						var issued uint64
						for issued < uint64(*msgs) {
							if issued >= w {
								if _, err := ct.Wait(base.Success + issued - w + 1); err != nil {
									return err
								}
							}
							if err := portals.Put(md, 0, 8, portals.CTAckReq, other, pt, 0, 0, 0, 0); err != nil {
								return err
							}
							issued++
						}
						v, err := ct.Wait(base.Success + issued)
						if err == nil && v.Failure != 0 {
							err = fmt.Errorf("%d failed puts", v.Failure)
						}
						return err
					})
					if err != nil {
						return err
					}
					best = min(best, d)
				}
				out.rate(fmt.Sprintf("portals 8 B put rate, %d in flight", w), float64(*msgs)/best.Seconds())
			}
			if err := barrier(); err != nil { // the target polls gex only: no Portals call
				return err
			}
		}
	}
	if me == 0 {
		out.print()
	}
	if err := barrier(); err != nil {
		return err
	}
	nonm.Fini()
	match.Fini()
	return c.Close()
}

// startProfile starts a CPU profile into name (rank 0) or name + ".target" (rank 1), if name
// is not empty; the function returned stops it.
func startProfile(name string, me gex.Rank) (func(), error) {
	if name == "" {
		return func() {}, nil
	}
	if me != 0 {
		name += ".target"
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// pingPong: rank 0 sends then waits, rank 1 waits then sends; the round trip of the best
// repetition (after a warm-up of a tenth).
func pingPong(me, n, reps int, send, wait func() error) (time.Duration, error) {
	one := func() error {
		if me == 0 {
			if err := send(); err != nil {
				return err
			}
			return wait()
		}
		if err := wait(); err != nil {
			return err
		}
		return send()
	}
	for i := 0; i < max(1, n/10); i++ {
		if err := one(); err != nil {
			return 0, err
		}
	}
	best := time.Duration(1 << 62)
	for r := 0; r < reps; r++ {
		d, err := timeIt(n, one)
		if err != nil {
			return 0, err
		}
		best = min(best, d)
	}
	return best, nil
}

// timeIt runs f n times and returns the time per run.
func timeIt(n int, f func() error) (time.Duration, error) {
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	return time.Since(t0) / time.Duration(n), nil
}

func pathOf(ids [2]portals.ProcessID) string {
	if ids[0].NID == ids[1].NID {
		return "shared memory (one host)"
	}
	return "TCP (two hosts)"
}

type report struct {
	csv  bool
	path string
	rows [][3]string
}

func (r *report) lat(name string, d time.Duration) {
	r.rows = append(r.rows, [3]string{name, fmt.Sprintf("%.3f", float64(d.Nanoseconds())/1000), "us"})
}

func (r *report) rate(name string, v float64) {
	r.rows = append(r.rows, [3]string{name, fmt.Sprintf("%.3f", v/1e6), "M msg/s"})
}

func (r *report) print() {
	if r.csv {
		for _, row := range r.rows {
			fmt.Printf("ptlbench,%s,%s,%s,%s\n", r.path, row[0], row[1], row[2])
		}
		return
	}
	fmt.Printf("ptlbench: rank 0 -> rank 1 over %s (best of %d)\n\n", r.path, *reps)
	w := 0
	for _, row := range r.rows {
		w = max(w, len(row[0]))
	}
	for _, row := range r.rows {
		fmt.Printf("%-*s %10s %s\n", w, row[0], row[1], row[2])
	}
	fmt.Println("\nreference (Sandia's C implementation, this kind of machine): 0.68 M msg/s; 3-8 ms round trip")
}
