// Command dht is a distributed hash table built from Active Messages: every
// key lives on the rank its hash names; inserts and lookups are requests to
// that rank, answered by replies. Run it with the launcher:
//
//	go run ./cmd/gexrun -n 4 ./examples/dht -keys 100000
//
// What it shows:
//   - AM handlers registered with RegisterHandlers, then a barrier before the
//     first request: with the receive goroutine on (or any peer polling
//     early) a request may arrive the moment a peer can send, and it must
//     find the handler;
//   - a Medium request carrying the value bytes, with the key in two
//     handler arguments (a 64-bit key as two int32 args), answered by a
//     Short reply (the acknowledgement);
//   - a Short request asking for a key, answered by a Medium reply carrying
//     the value back (or a "not found" argument);
//   - many requests outstanding at once: each rank sends all its inserts,
//     then waits for the count of acknowledgements, polling (BlockUntil)
//     so that its own handlers serve the peers meanwhile;
//   - handler-safe state: handlers may run on the receive goroutine and on
//     the main goroutine, so the table takes a lock (gex.HSL) and counters
//     are atomics.
//
// Each rank inserts -keys keys of its own (key k of rank r is r<<40|k, value
// "v<key>"), then looks every one up again and -keys keys nobody inserted;
// every value must come back as inserted, every stranger as absent, and the
// table sizes must add up to N*keys. Otherwise it exits non-zero.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/gexgo/gexgo/gex"
)

// Handler indices (the client's range starts at gex.AMIndexBase = 128).
const (
	hInsert gex.AMIndex = gex.AMIndexBase + iota // Medium request: value; args key lo, key hi
	hAck                                         // Short reply
	hLookup                                      // Short request: args key lo, key hi, slot
	hFound                                       // Medium reply: value; args slot, found
)

func main() {
	keys := flag.Int("keys", 10000, "keys each rank inserts (and as many it looks up but never inserted)")
	flag.Parse()

	c, ep, tm, err := gex.ClientInit("DHT", 0, gex.WithReceiveGoroutine(true))
	check(err, "ClientInit")
	me, n := tm.QueryRank(), tm.QuerySize()

	var (
		lock    gex.HSL
		table   = map[uint64][]byte{} // this rank's share, guarded by lock
		acks    atomic.Int64          // inserts acknowledged to this rank
		answers atomic.Int64          // lookups answered to this rank
	)
	lock.Init()
	results := make([][]byte, 2**keys) // lookup answers by slot (nil: not found)
	found := make([]bool, 2**keys)

	err = ep.RegisterHandlers([]gex.AMEntry{
		{Index: hInsert, Flags: gex.FlagAMMedium | gex.FlagAMRequest, NArgs: 2, Name: "insert",
			Fn: func(t *gex.Token, value []byte, a []gex.AMArg) {
				// The payload is valid only during the handler: keep a copy.
				lock.Lock()
				table[joinKey(a[0], a[1])] = append([]byte(nil), value...)
				lock.Unlock()
				check(t.ReplyShort(hAck, 0), "ReplyShort")
			}},
		{Index: hAck, Flags: gex.FlagAMShort | gex.FlagAMReply,
			Fn: func(*gex.Token, []byte, []gex.AMArg) { acks.Add(1) }},
		{Index: hLookup, Flags: gex.FlagAMShort | gex.FlagAMRequest, NArgs: 3, Name: "lookup",
			Fn: func(t *gex.Token, _ []byte, a []gex.AMArg) {
				lock.Lock()
				v, ok := table[joinKey(a[0], a[1])]
				lock.Unlock()
				f := gex.AMArg(0)
				if ok {
					f = 1
				}
				check(t.ReplyMedium(hFound, v, gex.EventNow, 0, a[2], f), "ReplyMedium")
			}},
		{Index: hFound, Flags: gex.FlagAMMedium | gex.FlagAMReply, NArgs: 2, Name: "found",
			Fn: func(_ *gex.Token, value []byte, a []gex.AMArg) {
				slot := int(a[0])
				results[slot], found[slot] = append([]byte(nil), value...), a[1] == 1
				answers.Add(1) // publishes the slot to the main goroutine
			}},
	})
	check(err, "RegisterHandlers")
	// Nobody sends before every rank has registered its handlers.
	check(tm.Barrier(), "Barrier")

	owner := func(key uint64) gex.Rank { return gex.Rank(hash(key) % uint64(n)) }
	keyOf := func(r gex.Rank, k int) uint64 { return uint64(r)<<40 | uint64(k) }
	valueOf := func(key uint64) []byte { return []byte("v" + strconv.FormatUint(key, 16)) }

	// Inserts: all outstanding at once; wait for every acknowledgement.
	for k := 0; k < *keys; k++ {
		key := keyOf(me, k)
		lo, hi := splitKey(key)
		// EventNow: the payload buffer may be reused when the call returns.
		check(tm.RequestMedium(owner(key), hInsert, valueOf(key), gex.EventNow, 0, lo, hi), "RequestMedium(insert)")
	}
	check(c.BlockUntil(func() bool { return acks.Load() == int64(*keys) }), "BlockUntil(acks)")
	check(tm.Barrier(), "Barrier") // every insert is in before anyone looks up

	// Lookups: our keys (slots 0..keys-1) and keys nobody inserted (another
	// rank's numbers past the range it used).
	for k := 0; k < 2**keys; k++ {
		key := keyOf(me, k) // k >= keys: never inserted
		lo, hi := splitKey(key)
		check(tm.RequestShort(owner(key), hLookup, 0, lo, hi, gex.AMArg(k)), "RequestShort(lookup)")
	}
	check(c.BlockUntil(func() bool { return answers.Load() == int64(2**keys) }), "BlockUntil(answers)")
	for k := 0; k < 2**keys; k++ {
		key := keyOf(me, k)
		switch {
		case k < *keys && (!found[k] || string(results[k]) != string(valueOf(key))):
			fail("rank %d: lookup of key %#x gave %q (found %v), want %q", me, key, results[k], found[k], valueOf(key))
		case k >= *keys && found[k]:
			fail("rank %d: key %#x was never inserted but the lookup found %q", me, key, results[k])
		}
	}

	// The shares add up to every insert, each key stored once.
	lock.Lock()
	mine := []uint64{uint64(len(table))}
	lock.Unlock()
	total := make([]uint64, 1)
	check(gex.ReduceToAll(tm, total, mine, gex.OPAdd), "ReduceToAll")
	if total[0] != uint64(n)*uint64(*keys) {
		fail("the table holds %d keys in all, want %d", total[0], uint64(n)*uint64(*keys))
	}
	if me == 0 {
		fmt.Printf("dht: %d ranks inserted and found %d keys, %d absent keys reported absent\n", n, total[0], total[0])
	}
	// The normal end: a final barrier (nobody leaves while a peer may still
	// need its handlers), then Close, which also sends what is still batched.
	check(tm.Barrier(), "Barrier")
	check(c.Close(), "Close")
}

// splitKey and joinKey carry a 64-bit key in two 32-bit handler arguments.
func splitKey(k uint64) (lo, hi gex.AMArg) { return gex.AMArg(uint32(k)), gex.AMArg(uint32(k >> 32)) }

func joinKey(lo, hi gex.AMArg) uint64 { return uint64(uint32(lo)) | uint64(uint32(hi))<<32 }

// hash mixes a key (splitmix64's finaliser) so that owners spread evenly.
func hash(k uint64) uint64 {
	k ^= k >> 30
	k *= 0xbf58476d1ce4e5b9
	k ^= k >> 27
	k *= 0x94d049bb133111eb
	return k ^ k>>31
}

func check(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "dht: "+format+"\n", args...)
	os.Exit(1)
}
