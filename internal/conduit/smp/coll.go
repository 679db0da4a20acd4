package smp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gexgo/gexgo/internal/shm"
)

// The collective area: one more shared region per rank, mapped by every
// neighbourhood peer, in which package gex keeps the flags, counters and
// staging buffers of its shared-memory collectives (docs/coll.md, "Shared
// memory"). This package creates and maps it and owns its 64-byte header;
// the rest of the layout is gex's.
//
//	0   header: magic "GXCO", version, rank, size (16 bytes; the line is reserved)
//	16  the CPU the owner last ran on, plus 1 (0: not known), which gex's
//	    polite waits write and read (CollAreaCPU)
//	64  gex's layout, up to CollAreaSize

const (
	collMagic   = 0x4f435847 // "GXCO" little-endian
	collVersion = 1

	// CollAreaHeader is where gex's part of the area starts.
	CollAreaHeader = 64
	// CollAreaCPU is the offset of the header's CPU word (uint32): the CPU
	// the owner last ran on, plus 1; 0 while not known. Package gex keeps
	// it (gex/polite.go).
	CollAreaCPU = 16
	// CollAreaSize is the size of every rank's collective area.
	CollAreaSize = 320 << 10
)

// setupColl creates this rank's collective area and maps those of the
// neighbourhood peers. Collective over all ranks (one AllGather). Failing to
// create or map one fails the conduit: every rank must see the same areas,
// since gex decides from them, alike on every member, whether a team's
// collectives use shared memory.
func (c *Conduit) setupColl() error {
	reg, err := c.cfg.Allocator.Create("gexgo-coll-"+strconv.Itoa(c.rank), CollAreaSize)
	if err != nil {
		return fmt.Errorf("smp: creating the collective area (%d bytes): %w", CollAreaSize, err)
	}
	b := reg.Bytes()
	binary.LittleEndian.PutUint32(b[0:], collMagic)
	binary.LittleEndian.PutUint32(b[4:], collVersion)
	binary.LittleEndian.PutUint32(b[8:], uint32(c.rank))
	binary.LittleEndian.PutUint32(b[12:], uint32(c.size))
	desc, err := reg.Desc().MarshalBinary()
	if err != nil {
		return err
	}
	descs, err := c.b.AllGather(desc)
	if err != nil {
		return fmt.Errorf("smp: exchanging collective areas: %w", err)
	}
	c.coll = make([][]byte, c.size)
	for p := 0; p < c.size; p++ {
		pr := &c.peers[p]
		if !pr.mapped || pr.remote {
			continue
		}
		if p == c.rank {
			c.coll[p] = reg.Bytes()[:CollAreaSize]
			continue
		}
		var d shm.Desc
		if err := d.UnmarshalBinary(descs[p]); err != nil {
			return fmt.Errorf("smp: rank %d's collective area: %w", p, err)
		}
		if d.Size < CollAreaSize {
			return fmt.Errorf("smp: rank %d's collective area has %d bytes, fewer than %d", p, d.Size, CollAreaSize)
		}
		r, err := c.cfg.Allocator.Open(d)
		if err != nil {
			return fmt.Errorf("smp: mapping rank %d's collective area: %w", p, err)
		}
		b := r.Bytes()
		if binary.LittleEndian.Uint32(b[0:]) != collMagic || binary.LittleEndian.Uint32(b[4:]) != collVersion ||
			int(binary.LittleEndian.Uint32(b[8:])) != p || int(binary.LittleEndian.Uint32(b[12:])) != c.size {
			return errors.New("smp: rank " + strconv.Itoa(p) + "'s collective area has a bad header")
		}
		c.coll[p] = b[:CollAreaSize]
	}
	return nil
}

// CollArea returns rank p's collective area as mapped here (CollAreaSize
// bytes, gex's part from CollAreaHeader), or nil when p is not in this
// rank's neighbourhood.
func (c *Conduit) CollArea(p int) []byte {
	if p < 0 || p >= len(c.coll) {
		return nil
	}
	return c.coll[p]
}

// WakeColl wakes rank p if it sleeps (SleepUntil or Sleep): a collective
// flag it may wait for changed. A load of p's sleeper count when it does not
// sleep.
func (c *Conduit) WakeColl(p int) {
	if p >= 0 && p < len(c.coll) && c.coll[p] != nil {
		c.peers[p].bell.Ring()
	}
}

// SleepUntil is Sleep that also returns once cond holds: cond is checked
// after this rank announced itself as a sleeper, so a peer that makes it
// true and then calls WakeColl cannot be missed. cond must not block.
func (c *Conduit) SleepUntil(cond func() bool, timeout time.Duration) {
	if c.cfg.Remote != nil {
		c.cfg.Remote.Arm()
	}
	c.bell.Sleep(func() bool { return c.hasWork() || cond() }, timeout)
}
