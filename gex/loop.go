package gex

import (
	"sync"

	"github.com/gexgo/gexgo/internal/conduit/loop"
)

// LoopConfig describes an in-process job (the loop conduit).
type LoopConfig struct {
	// Size is the number of ranks.
	Size int
	// Hosts optionally gives each rank a pretend host identity, to exercise
	// the neighbourhood and host queries.
	Hosts []string
	// SupernodeMaxSize limits the neighbourhood size as GASNET_SUPERNODE_MAXSIZE
	// does (0 = unlimited; 1 = no segment is cross-mapped).
	SupernodeMaxSize int
	// MaxSegSize is a GASNET_MAX_SEGSIZE value ("" = default).
	MaxSegSize string
}

// LoopJob is a job whose ranks are goroutines of this process, sharing heap
// memory through the same lock-free queues the shared-memory conduit uses. It
// is meant for tests (including under -race) and for trying the API without a
// launcher.
type LoopJob struct {
	j *loop.Job
}

// NewLoopJob creates an in-process job.
func NewLoopJob(cfg LoopConfig) (*LoopJob, error) {
	j, err := loop.NewJob(loop.Config{Size: cfg.Size, Hosts: cfg.Hosts, SupernodeMaxSize: cfg.SupernodeMaxSize, MaxSegSize: cfg.MaxSegSize})
	if err != nil {
		return nil, badArg("NewLoopJob", "%v", err)
	}
	return &LoopJob{j: j}, nil
}

// ClientInit is gex_Client_Init for rank of the job; every rank's goroutine
// must call it (it is collective).
func (lj *LoopJob) ClientInit(rank int, name string, flags Flags, opts ...Option) (*Client, *EP, *TM, error) {
	if err := checkClientArgs(name, flags); err != nil {
		return nil, nil, nil, err
	}
	cd, err := lj.j.Conduit(rank)
	if err != nil {
		return nil, nil, nil, badArg("ClientInit", "%v", err)
	}
	var cfg initConfig
	for _, o := range opts {
		o(&cfg)
	}
	return clientInit(cd, name, flags, cfg)
}

// Run runs body once per rank, each on its own goroutine, and waits for all of
// them (including ranks that end through Exit).
func (lj *LoopJob) Run(body func(rank int)) {
	var wg sync.WaitGroup
	for r := 0; r < lj.j.Size(); r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body(r)
		}()
	}
	wg.Wait()
}

// ExitCode reports whether a rank called Exit (or aborted), and the code.
func (lj *LoopJob) ExitCode() (code int, exited bool) { return lj.j.Exited() }
