package gex_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/gexgo/gexgo/gex"
)

// GASNet-EX "AM handlers", gex_EP_RegisterHandlers: entries with gex_index 0
// "are processed in the same order they appear in 'table' and are assigned the
// highest-numbered index which is then still unallocated (where 255 is the
// highest possible)", after the fixed-index entries; fixed indices are in
// [GEX_AM_INDEX_BASE .. 255] and "must be unique ... across multiple calls on
// the same gex_EP_t"; "Updating of gex_index fields that were passed as 0 upon
// input is the only modification this function will perform upon the contents
// of 'table'", and afterwards "the client is permitted to overwrite ... the
// contents of 'table'".

// loopOnly skips a test that builds its own loop job when the test binary runs
// as a rank of a process-mode job.
func loopOnly(t testing.TB) {
	t.Helper()
	if inRank() {
		t.Skip("loop-only test")
	}
}

// selfClient returns a client of a fresh one-rank loop job, initialised on
// the calling goroutine.
func selfClient(t testing.TB, opts ...gex.Option) (*gex.Client, *gex.EP, *gex.TM) {
	t.Helper()
	loopOnly(t)
	lj, err := gex.NewLoopJob(gex.LoopConfig{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, ep, tm, err := lj.ClientInit(0, "SELFTEST", 0, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, ep, tm
}

func nopHandler(*gex.Token, []byte, []gex.AMArg) {}

func shortReq(index gex.AMIndex) gex.AMEntry {
	return gex.AMEntry{Index: index, Fn: nopHandler, Flags: gex.FlagAMShort | gex.FlagAMRequest}
}

// wantErr fails unless err wraps want and its message names every word.
func wantErr(t testing.TB, what string, err, want error, words ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want an error wrapping %v", what, want)
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: %v does not wrap %v", what, err, want)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not name %q", what, err, w)
		}
	}
}

// registered reports whether index is registered on ep, by registering it
// (the probe registration stays in place when the index was free).
func registered(t testing.TB, ep *gex.EP, index gex.AMIndex) bool {
	t.Helper()
	err := ep.RegisterHandlers([]gex.AMEntry{shortReq(index)})
	if err != nil && !errors.Is(err, gex.ErrBadArg) {
		t.Fatalf("probe registration of %d: %v", index, err)
	}
	return err != nil
}

func TestRegisterDontCareAssignedDownward(t *testing.T) {
	_, ep, _ := selfClient(t)
	table := []gex.AMEntry{shortReq(0), shortReq(0), shortReq(0)}
	if err := ep.RegisterHandlers(table); err != nil {
		t.Fatal(err)
	}
	for i, want := range []gex.AMIndex{255, 254, 253} {
		if table[i].Index != want {
			t.Errorf("table[%d].Index = %d, want %d (255 downward in table order)", i, table[i].Index, want)
		}
	}
	// A later call continues below the highest free index.
	next := []gex.AMEntry{shortReq(0)}
	if err := ep.RegisterHandlers(next); err != nil {
		t.Fatal(err)
	}
	if next[0].Index != 252 {
		t.Errorf("second call assigned %d, want 252", next[0].Index)
	}
	// Fixed entries are registered first, wherever they sit in the table:
	// the don't-care entry before 251 in the table must not take 251.
	mixed := []gex.AMEntry{shortReq(0), shortReq(251), shortReq(0)}
	if err := ep.RegisterHandlers(mixed); err != nil {
		t.Fatal(err)
	}
	if mixed[0].Index != 250 || mixed[1].Index != 251 || mixed[2].Index != 249 {
		t.Errorf("mixed table got indices %d, %d, %d; want 250, 251, 249", mixed[0].Index, mixed[1].Index, mixed[2].Index)
	}
	// Holes left by fixed registrations are filled from the top.
	if err := ep.RegisterHandlers([]gex.AMEntry{shortReq(200)}); err != nil {
		t.Fatal(err)
	}
	if err := ep.RegisterHandlers([]gex.AMEntry{shortReq(248), shortReq(247)}); err != nil {
		t.Fatal(err)
	}
	fill := []gex.AMEntry{shortReq(0)}
	if err := ep.RegisterHandlers(fill); err != nil {
		t.Fatal(err)
	}
	if fill[0].Index != 246 {
		t.Errorf("assigned %d after 247..255 were taken, want 246", fill[0].Index)
	}
}

func TestRegisterFixedIndexRange(t *testing.T) {
	_, ep, _ := selfClient(t)
	for _, idx := range []gex.AMIndex{gex.AMIndexBase, 200, 255} {
		if err := ep.RegisterHandlers([]gex.AMEntry{shortReq(idx)}); err != nil {
			t.Errorf("fixed index %d: %v", idx, err)
		}
	}
	for _, idx := range []gex.AMIndex{1, 64, gex.AMIndexBase - 1} {
		err := ep.RegisterHandlers([]gex.AMEntry{shortReq(idx)})
		wantErr(t, "fixed index below AMIndexBase", err, gex.ErrBadArg, "Index")
	}
}

func TestRegisterDuplicates(t *testing.T) {
	_, ep, _ := selfClient(t)
	// Within one table: nothing is registered, not even the don't-care entry
	// or the first copy.
	table := []gex.AMEntry{shortReq(0), shortReq(200), shortReq(200)}
	err := ep.RegisterHandlers(table)
	wantErr(t, "duplicate index in one table", err, gex.ErrBadArg, "Index", "200")
	if table[0].Index != 0 {
		t.Errorf("failed call wrote Index %d back into the table", table[0].Index)
	}
	if registered(t, ep, 200) {
		t.Error("index 200 is registered after a failed call")
	}
	if registered(t, ep, 255) {
		t.Error("index 255 was assigned by a failed call")
	}
	// Across calls (200 and 255 are now taken by the probes).
	err = ep.RegisterHandlers([]gex.AMEntry{shortReq(0), shortReq(200)})
	wantErr(t, "index registered by an earlier call", err, gex.ErrBadArg, "Index", "200")
	if registered(t, ep, 254) {
		t.Error("index 254 was assigned by a failed call")
	}
}

func TestRegisterBadEntries(t *testing.T) {
	withFn := func(e gex.AMEntry, f func(*gex.AMEntry)) gex.AMEntry { f(&e); return e }
	base := gex.AMEntry{Index: 0, Fn: nopHandler, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 2}
	cases := []struct {
		name  string
		entry gex.AMEntry
		word  string
	}{
		{"nil Fn", withFn(base, func(e *gex.AMEntry) { e.Fn = nil }), "Fn"},
		{"no category", withFn(base, func(e *gex.AMEntry) { e.Flags = gex.FlagAMRequest }), "Flags"},
		{"no request/reply", withFn(base, func(e *gex.AMEntry) { e.Flags = gex.FlagAMShort }), "Flags"},
		{"Short and Medium", withFn(base, func(e *gex.AMEntry) { e.Flags = gex.FlagAMShort | gex.FlagAMMedium | gex.FlagAMRequest }), "Flags"},
		{"Short and Long", withFn(base, func(e *gex.AMEntry) { e.Flags = gex.FlagAMShort | gex.FlagAMLong | gex.FlagAMReply }), "Flags"},
		{"all categories", withFn(base, func(e *gex.AMEntry) { e.Flags = gex.FlagAMShort | gex.FlagAMMedLong | gex.FlagAMReqRep }), "Flags"},
		{"non-AM flag", withFn(base, func(e *gex.AMEntry) { e.Flags |= gex.FlagImmediate }), "Flags"},
		{"zero flags", withFn(base, func(e *gex.AMEntry) { e.Flags = 0 }), "Flags"},
		{"NArgs 17", withFn(base, func(e *gex.AMEntry) { e.NArgs = gex.MaxArgs + 1 }), "NArgs"},
		{"NArgs -1", withFn(base, func(e *gex.AMEntry) { e.NArgs = -1 }), "NArgs"},
	}
	_, ep, _ := selfClient(t)
	for _, tc := range cases {
		// The bad entry sits after a good fixed and a good don't-care entry:
		// neither may be registered.
		table := []gex.AMEntry{shortReq(0), shortReq(150), tc.entry}
		err := ep.RegisterHandlers(table)
		wantErr(t, tc.name, err, gex.ErrBadArg, tc.word)
		if table[0].Index != 0 {
			t.Errorf("%s: failed call wrote Index %d back", tc.name, table[0].Index)
		}
	}
	if registered(t, ep, 150) || registered(t, ep, 255) {
		t.Error("a failed call registered some of its entries")
	}
	// The valid combinations are accepted, including MEDLONG and REQREP.
	var good []gex.AMEntry
	for _, cat := range []gex.Flags{gex.FlagAMShort, gex.FlagAMMedium, gex.FlagAMLong, gex.FlagAMMedLong} {
		for _, rr := range []gex.Flags{gex.FlagAMRequest, gex.FlagAMReply, gex.FlagAMReqRep} {
			good = append(good, gex.AMEntry{Fn: nopHandler, Flags: cat | rr, NArgs: gex.MaxArgs})
		}
	}
	if err := ep.RegisterHandlers(good); err != nil {
		t.Fatalf("valid flag combinations: %v", err)
	}
}

func TestRegisterExhaustion(t *testing.T) {
	_, ep, _ := selfClient(t)
	const slots = 256 - gex.AMIndexBase
	mk := func(n int) []gex.AMEntry {
		tbl := make([]gex.AMEntry, n)
		for i := range tbl {
			tbl[i] = shortReq(0)
		}
		return tbl
	}
	// One too many in a single call: refused, nothing registered.
	err := ep.RegisterHandlers(mk(slots + 1))
	wantErr(t, "129 don't-care entries", err, gex.ErrResource, "Index")
	// Exactly the 128 client indices fit, each assigned once.
	all := mk(slots)
	if err := ep.RegisterHandlers(all); err != nil {
		t.Fatalf("128 don't-care entries after a failed call: %v", err)
	}
	seen := map[gex.AMIndex]bool{}
	for i, e := range all {
		if want := gex.AMIndex(255 - i); e.Index != want {
			t.Errorf("entry %d got %d, want %d", i, e.Index, want)
		}
		seen[e.Index] = true
	}
	if len(seen) != slots {
		t.Errorf("%d distinct indices assigned, want %d", len(seen), slots)
	}
	err = ep.RegisterHandlers(mk(1))
	wantErr(t, "don't-care entry with every index taken", err, gex.ErrResource, "Index")
	err = ep.RegisterHandlers([]gex.AMEntry{shortReq(gex.AMIndexBase)})
	wantErr(t, "fixed entry with every index taken", err, gex.ErrBadArg, "Index")
}

// The table is copied: overwriting it after the call changes nothing, and the
// handler sees the registered entry through Token.Info.
func TestRegisterCopiesTable(t *testing.T) {
	c, ep, tm := selfClient(t)
	var ran, wrong int
	var gotEntry gex.AMEntry
	table := []gex.AMEntry{{
		Fn: func(tk *gex.Token, _ []byte, args []gex.AMArg) {
			ran++
			info, _ := tk.Info(gex.TIEntry)
			gotEntry = *info.Entry
			if len(args) != 2 {
				wrong++
			}
		},
		Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 2, Name: "original", CData: "cd",
	}}
	if err := ep.RegisterHandlers(table); err != nil {
		t.Fatal(err)
	}
	h := table[0].Index
	table[0] = gex.AMEntry{Index: 1, Fn: func(*gex.Token, []byte, []gex.AMArg) { wrong++ }, Flags: gex.FlagAMMedium | gex.FlagAMReply, NArgs: 5, Name: "overwritten"}
	if err := tm.RequestShort(0, h, 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.BlockUntil(func() bool { return ran+wrong > 0 }); err != nil {
		t.Fatal(err)
	}
	if ran != 1 || wrong != 0 {
		t.Fatalf("original handler ran %d times, overwritten/wrong %d", ran, wrong)
	}
	if gotEntry.Index != h || gotEntry.Name != "original" || gotEntry.NArgs != 2 || gotEntry.CData != "cd" ||
		gotEntry.Flags != gex.FlagAMShort|gex.FlagAMRequest {
		t.Errorf("Token.Info entry = %+v, want the registered copy", gotEntry)
	}
}

// Concurrent calls: the order is unspecified, but every don't-care entry gets
// its own index.
func TestRegisterConcurrent(t *testing.T) {
	_, ep, _ := selfClient(t)
	const goroutines, per = 8, 16
	tables := make([][]gex.AMEntry, goroutines)
	var wg sync.WaitGroup
	for g := range tables {
		tables[g] = make([]gex.AMEntry, per)
		for i := range tables[g] {
			tables[g][i] = shortReq(0)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ep.RegisterHandlers(tables[g]); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[gex.AMIndex]bool{}
	for _, tbl := range tables {
		for _, e := range tbl {
			if e.Index < gex.AMIndexBase || seen[e.Index] {
				t.Errorf("index %d assigned twice or out of range", e.Index)
			}
			seen[e.Index] = true
		}
	}
}
