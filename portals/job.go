package portals

import (
	"encoding/binary"
	"strconv"
	"sync"

	"github.com/gexgo/gexgo/internal/boot"
)

// jobBoot is this process's bootstrap once JobMap has opened it. It stays open until the
// final Fini closes it: closing tells the launcher that this rank ended normally
// (FINALIZE), so that its process ending while other ranks still run is not taken for a
// rank leaving the job early (docs/core.md, "Ending a job").
var jobBoot struct {
	sync.Mutex
	b boot.Bootstrap
}

// closeJobBoot closes the bootstrap JobMap opened, if any (the final Fini).
func closeJobBoot() {
	jobBoot.Lock()
	defer jobBoot.Unlock()
	if jobBoot.b != nil {
		jobBoot.b.Close()
		jobBoot.b = nil
	}
}

// JobMap returns the job's rank → physical ID map for PtlSetMap (Portals 4.3 §4.1: the
// run-time system supplies the map): every rank of a job started by gexrun (or by a PMI
// launcher such as mpiexec.hydra) calls it collectively, after NIInit, and gets the physical
// IDs of all ranks in rank order, gathered through the job's bootstrap. A program started
// by hand is a job of one rank. A process that also uses gex (whose Client owns the
// bootstrap) uses JobMapExchange with an all-gather of its own instead.
func JobMap(ni NIHandle) ([]ProcessID, error) {
	jobBoot.Lock()
	defer jobBoot.Unlock()
	if jobBoot.b == nil {
		b, err := boot.FromEnv()
		if err != nil {
			return nil, errf(ErrFail, "JobMap", "bootstrap: "+err.Error())
		}
		jobBoot.b = b
	}
	return JobMapExchange(ni, jobBoot.b.AllGather)
}

// JobMapExchange is JobMap with the all-gather supplied by the caller: allGather(mine) must
// return every rank's contribution in rank order.
func JobMapExchange(ni NIHandle, allGather func(mine []byte) ([][]byte, error)) ([]ProcessID, error) {
	const fn = "JobMap"
	id, err := ni.PhysID()
	if err != nil {
		return nil, err
	}
	var mine [8]byte
	binary.BigEndian.PutUint32(mine[0:], uint32(id.NID))
	binary.BigEndian.PutUint32(mine[4:], uint32(id.PID))
	all, err := allGather(mine[:])
	if err != nil {
		return nil, errf(ErrFail, fn, "all-gather: "+err.Error())
	}
	m := make([]ProcessID, len(all))
	for r, b := range all {
		if len(b) != 8 {
			return nil, errf(ErrFail, fn, "rank "+strconv.Itoa(r)+" sent "+strconv.Itoa(len(b))+" bytes, want 8")
		}
		m[r] = Phys(NID(binary.BigEndian.Uint32(b)), PID(binary.BigEndian.Uint32(b[4:])))
	}
	return m, nil
}
