package gex_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// GASNet-EX "Fixed-payload AM APIs": every category x request/reply x
// {0, 1, 16} args x payload sizes {0, 1, 511, 512, max}, from every rank to
// every rank (itself included). The Request handler checks args and payload
// and answers with a Reply of the same shape; the Reply handler checks that.

type amCat int

const (
	catShort amCat = iota
	catMedium
	catLong
)

var catNames = [...]string{"Short", "Medium", "Long"}
var catFlags = [...]gex.Flags{gex.FlagAMShort, gex.FlagAMMedium, gex.FlagAMLong}
var nargsSet = [...]int{0, 1, 16}

// pattern is the payload byte i of a message from src of length n.
func pattern(src gex.Rank, n, i int, reply bool) byte {
	b := byte(int(src)*31 + n + i*7)
	if reply {
		b ^= 0x5a
	}
	return b
}

func fillPattern(buf []byte, src gex.Rank, reply bool) {
	for i := range buf {
		buf[i] = pattern(src, len(buf), i, reply)
	}
}

func checkPattern(buf []byte, src gex.Rank, reply bool) error {
	for i := range buf {
		if w := pattern(src, len(buf), i, reply); buf[i] != w {
			return fmt.Errorf("payload byte %d of %d from rank %d is %#x, want %#x", i, len(buf), src, buf[i], w)
		}
	}
	return nil
}

func argVal(src gex.Rank, n, i int) gex.AMArg { return gex.AMArg(int(src)*100000 + n*17 + i - 1<<30) }

func checkArgs(args []gex.AMArg, src gex.Rank, n, want int) error {
	if len(args) != want {
		return fmt.Errorf("handler got %d args, want %d", len(args), want)
	}
	for i, a := range args {
		if w := argVal(src, n, i); a != w {
			return fmt.Errorf("arg %d = %d, want %d", i, a, w)
		}
	}
	return nil
}

// amZone is where Long payloads land: a zone per (kind, sender) so that
// concurrent senders never overlap.
func amZone(kind, sender gex.Rank, size gex.Rank, zone uint64) uint64 {
	return (uint64(kind)*uint64(size) + uint64(sender)) * zone
}

func TestAMCategoriesMatrix(t *testing.T) {
	for _, mode := range []struct {
		name      string
		supernode int
	}{{"mapped", 0}, {"unmapped", 1}} {
		t.Run(mode.name, func(t *testing.T) {
			const n = 3
			zone := uint64(4 << 20) // >= every MaxLong
			conformance(t, n, jobOpts{segSize: 2 * n * zone, supernode: mode.supernode}, func(e *rankEnv) {
				amMatrix(e, zone)
			})
		})
	}
}

func amMatrix(e *rankEnv, zone uint64) {
	var replies atomic.Int64
	var failure atomic.Pointer[string]
	fail := func(err error) {
		s := err.Error()
		failure.CompareAndSwap(nil, &s)
	}
	segOf := func(r gex.Rank) gex.Addr {
		bs, _, err := e.tm.QueryBoundSegmentNB(r, gex.FlagImmediate)
		if err != nil || bs.Size == 0 {
			fail(fmt.Errorf("QueryBoundSegmentNB(%d): %v size %d", r, err, bs.Size))
		}
		return bs.Owner
	}
	var table []gex.AMEntry
	reqIdx := map[[2]int]gex.AMIndex{}
	repIdx := map[[2]int]gex.AMIndex{}
	for cat := catShort; cat <= catLong; cat++ {
		for _, na := range nargsSet {
			cat, na := cat, na
			req := gex.AMEntry{Flags: catFlags[cat] | gex.FlagAMRequest, NArgs: na, Name: fmt.Sprintf("req-%s-%d", catNames[cat], na)}
			req.Fn = func(tk *gex.Token, payload []byte, args []gex.AMArg) {
				info, _ := tk.Info(gex.TIAll)
				src := info.SrcRank
				n := len(payload)
				if err := checkArgs(args, src, n, na); err != nil {
					fail(fmt.Errorf("%s: %v", req.Name, err))
				}
				if !info.IsReq || info.IsLong != (cat == catLong) || info.Entry.NArgs != na || info.EP != e.ep {
					fail(fmt.Errorf("%s: bad token info %+v", req.Name, info))
				}
				if cat == catShort && payload != nil {
					fail(fmt.Errorf("%s: Short handler got a payload", req.Name))
				}
				if err := checkPattern(payload, src, false); err != nil {
					fail(fmt.Errorf("%s: %v", req.Name, err))
				}
				if cat == catLong {
					want := segOf(e.rank) + gex.Addr(amZone(0, src, e.size, zone))
					if tk.Addr() != want {
						fail(fmt.Errorf("%s: Long dest %#x, want %#x", req.Name, tk.Addr(), want))
					}
				}
				// Reply with the same shape.
				out := make([]byte, n)
				fillPattern(out, e.rank, true)
				rargs := make([]gex.AMArg, na)
				for i := range rargs {
					rargs[i] = argVal(e.rank, n, i)
				}
				h := repIdx[[2]int{int(cat), na}]
				var err error
				switch cat {
				case catShort:
					err = tk.ReplyShort(h, 0, rargs...)
				case catMedium:
					err = tk.ReplyMedium(h, out, gex.EventNow, 0, rargs...)
				case catLong:
					dest := segOf(src) + gex.Addr(amZone(1, e.rank, e.size, zone))
					err = tk.ReplyLong(h, out, dest, nil, 0, rargs...)
				}
				if err != nil {
					fail(fmt.Errorf("%s: reply: %v", req.Name, err))
				}
				// At most one Reply per Request.
				if err := tk.ReplyShort(h, 0, rargs...); err == nil || !errors.Is(err, gex.ErrBadArg) {
					fail(fmt.Errorf("%s: second Reply returned %v, want ErrBadArg", req.Name, err))
				}
			}
			rep := gex.AMEntry{Flags: catFlags[cat] | gex.FlagAMReply, NArgs: na, Name: fmt.Sprintf("rep-%s-%d", catNames[cat], na)}
			rep.Fn = func(tk *gex.Token, payload []byte, args []gex.AMArg) {
				info, _ := tk.Info(gex.TIAll)
				if err := checkArgs(args, info.SrcRank, len(payload), na); err != nil {
					fail(fmt.Errorf("%s: %v", rep.Name, err))
				}
				if err := checkPattern(payload, info.SrcRank, true); err != nil {
					fail(fmt.Errorf("%s: %v", rep.Name, err))
				}
				if info.IsReq {
					fail(fmt.Errorf("%s: token says request", rep.Name))
				}
				if err := tk.ReplyShort(rep.Index, 0); !errors.Is(err, gex.ErrRestricted) {
					fail(fmt.Errorf("%s: Reply from a Reply handler returned %v, want ErrRestricted", rep.Name, err))
				}
				replies.Add(1)
			}
			table = append(table, req, rep)
		}
	}
	e.Check(e.ep.RegisterHandlers(table), "RegisterHandlers")
	for i := 0; i < len(table); i += 2 {
		cat, na := i/2/len(nargsSet), nargsSet[i/2%len(nargsSet)]
		reqIdx[[2]int{cat, na}] = table[i].Index
		repIdx[[2]int{cat, na}] = table[i+1].Index
	}
	e.Barrier() // every rank's handlers are registered

	want := int64(0)
	for peer := gex.Rank(0); peer < e.size; peer++ {
		maxMed, err := e.tm.MaxRequestMedium(peer, 0, 16)
		e.Check(err, "MaxRequestMedium")
		maxLong, err := e.tm.MaxRequestLong(peer, 0, 16)
		e.Check(err, "MaxRequestLong")
		if maxMed < 512 || maxLong < 512 {
			e.Fatalf("limits to %d below 512: medium %d long %d", peer, maxMed, maxLong)
		}
		for cat := catShort; cat <= catLong; cat++ {
			sizes := []int{0}
			switch cat {
			case catMedium:
				sizes = []int{0, 1, 511, 512, maxMed}
			case catLong:
				sizes = []int{0, 1, 511, 512, maxLong}
			}
			for _, na := range nargsSet {
				for _, n := range sizes {
					buf := make([]byte, n)
					fillPattern(buf, e.rank, false)
					args := make([]gex.AMArg, na)
					for i := range args {
						args[i] = argVal(e.rank, n, i)
					}
					h := reqIdx[[2]int{int(cat), na}]
					var lcEv gex.Event
					switch cat {
					case catShort:
						err = e.tm.RequestShort(peer, h, 0, args...)
					case catMedium:
						err = e.tm.RequestMedium(peer, h, buf, &lcEv, 0, args...)
					case catLong:
						dest := segOf(peer) + gex.Addr(amZone(0, e.rank, e.size, zone))
						err = e.tm.RequestLong(peer, h, buf, dest, gex.EventGroup, 0, args...)
					}
					e.Check(err, fmt.Sprintf("%s request to %d, %d args, %d bytes", catNames[cat], peer, na, n))
					e.Check(lcEv.Wait(), "local completion event")
					// The source may be reused after local completion: it must not
					// change what arrives.
					for i := range buf {
						buf[i] = 0xEE
					}
					want++
					e.Check(e.c.BlockUntil(func() bool { return replies.Load() >= want || failure.Load() != nil }), "BlockUntil")
					if f := failure.Load(); f != nil {
						e.Fatalf("%s", *f)
					}
				}
			}
		}
	}
	e.Barrier()
	if f := failure.Load(); f != nil {
		e.Fatalf("%s", *f)
	}
	e.Logf("%d request/reply pairs per rank checked", want)
}
