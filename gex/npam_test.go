package gex_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// GASNet-EX "Negotiated-payload AM APIs": "The return from the Prepare call
// provides the client with an address and a length. The length is in the
// range defined by the minimum and maximum lengths. When the client_buf
// argument is non-NULL, the address provided by the return will be exactly
// that value"; "The client may send a length shorter than the value returned
// from the Prepare"; least_payload "must not exceed the value of the
// gex_AM_Max[...]() call with the analogous Prepare arguments" (with a
// GASNet-allocated buffer: GEX_FLAG_AM_PREPARE_LEAST_ALLOC); most_payload
// "must not be less than least_payload"; "If client_buf is NULL, [lc_opt] must
// also be NULL"; dest_addr: "If this value is non-NULL then the client is
// required to pass the same value to the Commit call"; the SrcDesc "must be
// consumed (exactly once) by a Commit in the same thread".

// npMsg is one negotiated-payload AM as the handler saw it.
type npMsg struct {
	src     gex.Rank
	payload []byte
	args    []gex.AMArg
	addr    gex.Addr
	isReq   bool
}

// npPattern is byte i of a payload tagged tag.
func npPattern(tag, i int) byte { return byte(tag*13 + i*7 + 1) }

func npFill(b []byte, tag int) {
	for i := range b {
		b[i] = npPattern(tag, i)
	}
}

func npCheck(m npMsg, tag, n int, nargs int) error {
	if len(m.payload) != n {
		return fmt.Errorf("payload of %d bytes, want %d", len(m.payload), n)
	}
	for i, v := range m.payload {
		if v != npPattern(tag, i) {
			return fmt.Errorf("payload byte %d = %#x, want %#x", i, v, npPattern(tag, i))
		}
	}
	if len(m.args) != nargs {
		return fmt.Errorf("%d args, want %d", len(m.args), nargs)
	}
	for i, a := range m.args {
		if a != gex.AMArg(tag*100+i) {
			return fmt.Errorf("arg %d = %d, want %d", i, a, tag*100+i)
		}
	}
	return nil
}

func npArgs(tag, n int) []gex.AMArg {
	a := make([]gex.AMArg, n)
	for i := range a {
		a[i] = gex.AMArg(tag*100 + i)
	}
	return a
}

// npHandlers is the handler set of the NPAM tests: a Medium and a Long
// Request handler and Reply handler per nargs in {0, 3}, all delivering into
// a channel-like slot.
type npHandlers struct {
	reqMed, reqLong, repMed, repLong [2]gex.AMIndex // [0]: 0 args, [1]: 3 args
	got                              chan npMsg
	onRequest                        func(tk *gex.Token, m npMsg)
}

var npNArgs = [2]int{0, 3}

func registerNP(e *rankEnv, h *npHandlers) {
	h.got = make(chan npMsg, 64)
	deliver := func(tk *gex.Token, p []byte, a []gex.AMArg) {
		info, _ := tk.Info(gex.TISrcRank | gex.TIIsReq)
		m := npMsg{src: info.SrcRank, payload: append([]byte(nil), p...), args: append([]gex.AMArg(nil), a...), addr: tk.Addr(), isReq: info.IsReq}
		if info.IsReq && h.onRequest != nil {
			h.onRequest(tk, m)
		}
		h.got <- m
	}
	var table []gex.AMEntry
	for _, na := range npNArgs {
		table = append(table,
			gex.AMEntry{Name: fmt.Sprintf("reqMed%d", na), Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: na, Fn: deliver},
			gex.AMEntry{Name: fmt.Sprintf("reqLong%d", na), Flags: gex.FlagAMLong | gex.FlagAMRequest, NArgs: na, Fn: deliver},
			gex.AMEntry{Name: fmt.Sprintf("repMed%d", na), Flags: gex.FlagAMMedium | gex.FlagAMReply, NArgs: na, Fn: deliver},
			gex.AMEntry{Name: fmt.Sprintf("repLong%d", na), Flags: gex.FlagAMLong | gex.FlagAMReply, NArgs: na, Fn: deliver},
		)
	}
	e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
	for i := range npNArgs {
		h.reqMed[i], h.reqLong[i], h.repMed[i], h.repLong[i] = table[4*i].Index, table[4*i+1].Index, table[4*i+2].Index, table[4*i+3].Index
	}
}

// await polls until the next message arrives.
func (h *npHandlers) await(e *rankEnv) npMsg {
	e.t.Helper()
	var m npMsg
	ok := false
	e.Check(e.c.BlockUntil(func() bool {
		select {
		case m = <-h.got:
			ok = true
		default:
		}
		return ok
	}), "BlockUntil")
	return m
}

func checkSize(e *rankEnv, what string, sd *gex.SrcDesc, least, most int) {
	e.t.Helper()
	if sd.Size() < least || sd.Size() > most || len(sd.Addr()) != sd.Size() {
		e.Fatalf("%s: Size %d (Addr len %d), want in [%d, %d]", what, sd.Size(), len(sd.Addr()), least, most)
	}
}

func sameBuf(a, b []byte) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

func TestNPAMRequests(t *testing.T) {
	for _, mode := range []struct {
		name      string
		supernode int
	}{{"mapped", 0}, {"unmapped", 1}} {
		t.Run(mode.name, func(t *testing.T) {
			const segSize = 1 << 20
			conformance(t, 2, jobOpts{segSize: segSize, supernode: mode.supernode}, func(e *rankEnv) {
				var h npHandlers
				registerNP(e, &h)
				e.Barrier()
				peer := (e.rank + 1) % e.size
				bs, _, err := e.tm.QueryBoundSegmentNB(peer, 0)
				e.Check(err, "QueryBoundSegmentNB")
				zone := bs.Owner + gex.Addr(uint64(e.rank)*segSize/2)
				maxAllocM, err := e.tm.MaxRequestMedium(peer, gex.FlagAMPrepareLeastAlloc, 3)
				e.Check(err, "MaxRequestMedium(LEAST_ALLOC)")
				maxAllocL, err := e.tm.MaxRequestLong(peer, gex.FlagAMPrepareLeastAlloc, 3)
				e.Check(err, "MaxRequestLong(LEAST_ALLOC)")
				maxClientM, err := e.tm.MaxRequestMedium(peer, gex.FlagAMPrepareLeastClient, 3)
				e.Check(err, "MaxRequestMedium(LEAST_CLIENT)")
				maxM, err := e.tm.MaxRequestMedium(peer, 0, 3)
				e.Check(err, "MaxRequestMedium")

				tag := 0
				for ai, na := range npNArgs {
					for _, cb := range []bool{false, true} {
						for _, sz := range [][2]int{{1, 1}, {10, 100}, {512, 512}, {100, maxAllocM}, {maxAllocM, 4 * maxM}} {
							least, most := sz[0], sz[1]
							if !cb && least > maxAllocM || cb && least > maxClientM {
								continue
							}
							tag++
							what := fmt.Sprintf("PrepareRequestMedium(client=%v, %d, %d, nargs %d)", cb, least, most, na)
							var client []byte
							var lc *gex.Event
							var ev gex.Event
							if cb {
								client = make([]byte, most+7)
								lc = &ev
							}
							sd, err := e.tm.PrepareRequestMedium(peer, client, least, most, lc, 0, na)
							e.Check(err, what)
							checkSize(e, what, sd, least, most)
							if cb && !sameBuf(sd.Addr(), client) {
								e.Fatalf("%s: Addr is not the client buffer", what)
							}
							n := sd.Size()
							if n > least {
								n-- // commit fewer bytes than prepared
							}
							npFill(sd.Addr()[:n], tag)
							e.Check(sd.CommitRequestMedium(h.reqMed[ai], n, npArgs(tag, na)...), what+": Commit")
							e.Check(ev.Wait(), what+": lc event")
							if m := h.await(e); m.src != peer || !m.isReq {
								e.Fatalf("%s: got a message from %d (isReq %v), want peer %d's Request", what, m.src, m.isReq, peer)
							} else if err := npCheck(m, tag, n, na); err != nil {
								e.Fatalf("%s: %v", what, err)
							}
							// AMs are not ordered: keep both ranks in step.
							e.Barrier()
						}
					}
					// Long, with and without a dest at Prepare.
					for _, cb := range []bool{false, true} {
						for _, prepDest := range []bool{false, true} {
							tag++
							least, most := 64, maxAllocL
							what := fmt.Sprintf("PrepareRequestLong(client=%v, dest at prepare=%v, nargs %d)", cb, prepDest, na)
							var client []byte
							if cb {
								client = make([]byte, 3000)
							}
							dest := zone + gex.Addr(tag*8)
							pd := gex.Addr(0)
							if prepDest {
								pd = dest
							}
							sd, err := e.tm.PrepareRequestLong(peer, client, least, most, pd, nil, 0, na)
							e.Check(err, what)
							checkSize(e, what, sd, least, most)
							if cb && !sameBuf(sd.Addr(), client) {
								e.Fatalf("%s: Addr is not the client buffer", what)
							}
							n := min(sd.Size(), 2000)
							npFill(sd.Addr()[:n], tag)
							if prepDest {
								err := sd.CommitRequestLong(h.reqLong[ai], n, dest+8, npArgs(tag, na)...)
								expectBadArg(e, what+": Commit with a dest other than Prepare's", err)
							}
							e.Check(sd.CommitRequestLong(h.reqLong[ai], n, dest, npArgs(tag, na)...), what+": Commit")
							m := h.await(e)
							if err := npCheck(m, tag, n, na); err != nil {
								e.Fatalf("%s: %v", what, err)
							}
							// The peer's dest is in our segment, in the peer's zone.
							if want := e.seg.QueryAddr() + gex.Addr(uint64(peer)*segSize/2+uint64(tag*8)); m.addr != want {
								e.Fatalf("%s: handler Addr %#x, want %#x", what, m.addr, want)
							}
							e.Barrier()
						}
					}
				}
				e.Barrier()
			})
		})
	}
}

func TestNPAMReplies(t *testing.T) {
	for _, mode := range []struct {
		name      string
		supernode int
	}{{"mapped", 0}, {"unmapped", 1}} {
		t.Run(mode.name, func(t *testing.T) {
			const segSize = 1 << 20
			conformance(t, 2, jobOpts{segSize: segSize, supernode: mode.supernode}, func(e *rankEnv) {
				var h npHandlers
				var replyErr atomic.Pointer[string]
				fail := func(format string, args ...any) {
					s := fmt.Sprintf(format, args...)
					replyErr.CompareAndSwap(nil, &s)
				}
				// The Request's args say how to reply: [variant, nargs index].
				h.onRequest = func(tk *gex.Token, m npMsg) {
					if len(m.args) != 3 {
						return
					}
					variant, ai, tag := int(m.args[0]), int(m.args[1]), int(m.args[2])
					na := npNArgs[ai]
					long := variant&1 != 0
					cb := variant&2 != 0
					var client []byte
					var lc *gex.Event
					var ev gex.Event
					if cb {
						client = make([]byte, 5000)
						lc = &ev
					}
					if _, err := tk.PrepareReplyMedium(nil, 8, 8, gex.EventGroup, 0, na); err == nil || !errors.Is(err, gex.ErrBadArg) {
						fail("PrepareReplyMedium with EventGroup: %v, want ErrBadArg", err)
					}
					var sd *gex.SrcDesc
					var err error
					least, most := 100, 4000
					info, _ := tk.Info(gex.TISrcRank)
					bs, _, _ := e.tm.QueryBoundSegmentNB(info.SrcRank, gex.FlagImmediate)
					dest := bs.Owner + gex.Addr(uint64(e.rank)*segSize/2+uint64(tag)*16)
					if long {
						sd, err = tk.PrepareReplyLong(client, least, most, dest, lc, 0, na)
					} else {
						sd, err = tk.PrepareReplyMedium(client, least, most, lc, 0, na)
					}
					if err != nil {
						fail("PrepareReply(variant %d): %v", variant, err)
						return
					}
					if sd.Size() < least || sd.Size() > most || (cb && !sameBuf(sd.Addr(), client)) {
						fail("PrepareReply(variant %d): Size %d, want in [%d, %d], client buffer %v", variant, sd.Size(), least, most, cb)
					}
					// Between PrepareReply and Commit, another Reply is refused.
					if err := tk.ReplyShort(h.repMed[0], 0); err == nil {
						fail("ReplyShort between PrepareReply and its Commit succeeded")
					}
					n := sd.Size() - 1
					npFill(sd.Addr()[:n], tag)
					if long {
						err = sd.CommitReplyLong(h.repLong[ai], n, dest, npArgs(tag, na)...)
					} else {
						err = sd.CommitReplyMedium(h.repMed[ai], n, npArgs(tag, na)...)
					}
					if err != nil {
						fail("CommitReply(variant %d): %v", variant, err)
					}
					// At most one Reply per Request.
					if err := tk.ReplyMedium(h.repMed[0], nil, nil, 0); err == nil {
						fail("a second Reply after CommitReply succeeded")
					}
					if _, err := tk.PrepareReplyMedium(nil, 8, 8, nil, 0, 0); err == nil {
						fail("a second PrepareReply after CommitReply succeeded")
					}
				}
				registerNP(e, &h)
				e.Barrier()
				peer := (e.rank + 1) % e.size
				tag := 0
				for ai := range npNArgs {
					for variant := 0; variant < 4; variant++ {
						tag++
						e.Check(e.tm.RequestMedium(peer, h.reqMed[1], nil, nil, 0, gex.AMArg(variant), gex.AMArg(ai), gex.AMArg(tag)), "RequestMedium")
						// Our handler serves the peer's Request too; skip Requests.
						var m npMsg
						for {
							m = h.await(e)
							if !m.isReq {
								break
							}
						}
						if p := replyErr.Load(); p != nil {
							e.Fatalf("in the Request handler: %s", *p)
						}
						if m.src != peer {
							e.Fatalf("Reply from %d, want %d", m.src, peer)
						}
						n := len(m.payload)
						if n < 99 || n > 3999 {
							e.Fatalf("variant %d: Reply of %d bytes, want Size-1 in [99, 3999]", variant, n)
						}
						if err := npCheck(m, tag, n, npNArgs[ai]); err != nil {
							e.Fatalf("variant %d: %v", variant, err)
						}
						if variant&1 != 0 {
							want := e.seg.QueryAddr() + gex.Addr(uint64(peer)*segSize/2+uint64(tag)*16)
							if m.addr != want {
								e.Fatalf("variant %d: ReplyLong Addr %#x, want %#x", variant, m.addr, want)
							}
						}
					}
				}
				e.Barrier()
				if p := replyErr.Load(); p != nil {
					e.Fatalf("in the Request handler: %s", *p)
				}
			})
		})
	}
}

func TestNPAMMisuse(t *testing.T) {
	conformance(t, 2, jobOpts{segSize: 1 << 16}, func(e *rankEnv) {
		var h npHandlers
		registerNP(e, &h)
		e.Barrier()
		peer := (e.rank + 1) % e.size
		maxAlloc, err := e.tm.MaxRequestMedium(peer, gex.FlagAMPrepareLeastAlloc, 0)
		e.Check(err, "MaxRequestMedium(LEAST_ALLOC)")
		maxAllocL, err := e.tm.MaxRequestLong(peer, gex.FlagAMPrepareLeastAlloc, 0)
		e.Check(err, "MaxRequestLong(LEAST_ALLOC)")
		maxClient, err := e.tm.MaxRequestMedium(peer, gex.FlagAMPrepareLeastClient, 0)
		e.Check(err, "MaxRequestMedium(LEAST_CLIENT)")
		var ev gex.Event
		for _, c := range []namedCall{
			{"least > Max(LEAST_ALLOC), library buffer", func() error {
				_, err := e.tm.PrepareRequestMedium(peer, nil, maxAlloc+1, maxAlloc+1, nil, 0, 0)
				return err
			}},
			{"Long least > Max(LEAST_ALLOC), library buffer", func() error {
				_, err := e.tm.PrepareRequestLong(peer, nil, maxAllocL+1, maxAllocL+1, 0, nil, 0, 0)
				return err
			}},
			{"least > Max(LEAST_CLIENT), client buffer", func() error {
				_, err := e.tm.PrepareRequestMedium(peer, make([]byte, maxClient+1), maxClient+1, maxClient+1, nil, 0, 0)
				return err
			}},
			{"most < least", func() error { _, err := e.tm.PrepareRequestMedium(peer, nil, 16, 15, nil, 0, 0); return err }},
			{"most < least, client buffer", func() error {
				_, err := e.tm.PrepareRequestMedium(peer, make([]byte, 64), 16, 15, nil, 0, 0)
				return err
			}},
			{"client buffer shorter than least", func() error {
				_, err := e.tm.PrepareRequestMedium(peer, make([]byte, 8), 16, 32, nil, 0, 0)
				return err
			}},
			{"lc_opt with a library buffer", func() error { _, err := e.tm.PrepareRequestMedium(peer, nil, 16, 32, &ev, 0, 0); return err }},
			{"EventDefer", func() error {
				_, err := e.tm.PrepareRequestMedium(peer, make([]byte, 64), 16, 32, gex.EventDefer, 0, 0)
				return err
			}},
			{"nargs 17", func() error { _, err := e.tm.PrepareRequestMedium(peer, nil, 16, 32, nil, 0, 17); return err }},
			{"rank out of range", func() error { _, err := e.tm.PrepareRequestMedium(e.size, nil, 16, 32, nil, 0, 0); return err }},
			{"FlagPeerSegOffset on a Medium", func() error {
				_, err := e.tm.PrepareRequestMedium(peer, nil, 16, 32, nil, gex.FlagPeerSegOffset, 0)
				return err
			}},
		} {
			expectBadArg(e, "Prepare with "+c.name, c.f())
		}
		// None of the refused Prepares left this goroutine restricted.
		e.Check(e.c.Poll(), "Poll after refused Prepares")

		// The maxima themselves are accepted.
		sd, err := e.tm.PrepareRequestMedium(peer, nil, maxAlloc, maxAlloc, nil, 0, 0)
		e.Check(err, "Prepare with least = Max(LEAST_ALLOC)")
		e.Check(sd.CommitRequestMedium(h.reqMed[0], 0), "Commit")

		// Prepare/commit pairs do not nest.
		sd, err = e.tm.PrepareRequestMedium(peer, nil, 8, 8, nil, 0, 0)
		e.Check(err, "Prepare")
		if _, err := e.tm.PrepareRequestMedium(peer, nil, 8, 8, nil, 0, 0); !errors.Is(err, gex.ErrRestricted) {
			e.Fatalf("nested Prepare: %v, want ErrRestricted", err)
		}
		// Commit checks: nargs fixed at Prepare, nbytes within Size, category.
		expectBadArg(e, "Commit with more args than Prepare declared", sd.CommitRequestMedium(h.reqMed[1], 0, 1, 2, 3))
		expectBadArg(e, "Commit of more bytes than Size", sd.CommitRequestMedium(h.reqMed[0], sd.Size()+1))
		expectBadArg(e, "Commit of -1 bytes", sd.CommitRequestMedium(h.reqMed[0], -1))
		expectBadArg(e, "CommitRequestLong of a Medium SrcDesc", sd.CommitRequestLong(h.reqLong[0], 0, 0))
		expectBadArg(e, "CommitReplyMedium of a Request SrcDesc", sd.CommitReplyMedium(h.repMed[0], 0))
		// Commit on another goroutine is refused.
		other := make(chan error)
		go func() { other <- sd.CommitRequestMedium(h.reqMed[0], 0) }()
		expectBadArg(e, "Commit on another goroutine", <-other)
		// The right Commit works once; a second one is refused.
		npFill(sd.Addr(), 77)
		e.Check(sd.CommitRequestMedium(h.reqMed[0], sd.Size()), "Commit")
		expectBadArg(e, "second Commit", sd.CommitRequestMedium(h.reqMed[0], sd.Size()))
		// Exactly the two committed Mediums arrive (in either order).
		m1, m2 := h.await(e), h.await(e)
		if len(m1.payload) != 0 {
			m1, m2 = m2, m1
		}
		if len(m1.payload) != 0 {
			e.Fatalf("no zero-byte Medium arrived")
		}
		if err := npCheck(m2, 77, 8, 0); err != nil {
			e.Fatalf("committed Medium: %v", err)
		}
		e.Check(e.c.Poll(), "Poll after Commit")
		e.Barrier()
		if len(h.got) != 0 {
			e.Fatalf("%d unexpected messages arrived", len(h.got))
		}
	})
}
