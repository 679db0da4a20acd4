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
