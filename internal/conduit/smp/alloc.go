package smp

import "github.com/gexgo/gexgo/internal/shm"

// Allocator returns the allocator this conduit makes shared regions with, so
// that segments created after start-up (gex_Segment_Create) are shared memory
// that the neighbourhood can map like the primordial segment.
func (c *Conduit) Allocator() shm.Allocator { return c.cfg.Allocator }
