package gex

// Hooks for the collectives tests.

// CollTeams is the number of teams c's collectives engine knows (the
// primordial team included).
func CollTeams(c *Client) int {
	c.coll.mu.Lock()
	defer c.coll.mu.Unlock()
	return len(c.coll.teams)
}

// CollIndex is the library handler index of collective messages, for tests
// that send malformed ones.
const CollIndex = hColl

// CollStale is the number of collective messages c dropped as naming an
// operation it had already completed.
func CollStale(c *Client) uint64 { return c.coll.stale.Load() }

// CollPath names how tm's barrier travels: "shm" (flat, through the
// collective areas), "shm-hier" (shared memory inside each neighbourhood,
// AMs among their leaders) or "am".
func CollPath(tm *TM) string {
	tm.c.coll.mu.Lock()
	defer tm.c.coll.mu.Unlock()
	switch st := tm.ts.shm; {
	case st == nil:
		return "am"
	case st.hier:
		return "shm-hier"
	}
	return "shm"
}

// CollShmLines is the number of lines of c's collective area in use (the
// primordial team's included).
func CollShmLines(c *Client) int {
	c.coll.mu.Lock()
	defer c.coll.mu.Unlock()
	n := 0
	for _, used := range c.coll.shm.slots {
		if used {
			n++
		}
	}
	return n
}

// CollShmSmallOps is the number of small reductions tm has run through
// the contribution buffers (-1: it has none).
func CollShmSmallOps(tm *TM) int {
	tm.c.coll.mu.Lock()
	defer tm.c.coll.mu.Unlock()
	if st := tm.ts.shm; st != nil && st.small != nil {
		return int(st.nsmall)
	}
	return -1
}

// CollShmHierOps is the number of hierarchical broadcasts and reductions
// initiated over tm (-1: tm is not hierarchical).
func CollShmHierOps(tm *TM) int {
	tm.c.coll.mu.Lock()
	defer tm.c.coll.mu.Unlock()
	if st := tm.ts.shm; st != nil && st.hier {
		return st.nhier
	}
	return -1
}

// HierBcastMin is the smallest hierarchical broadcast.
const HierBcastMin = hierBcastMin
