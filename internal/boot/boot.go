// Package boot is the job bootstrap that runs before the network is up: who am
// I, how many are we, which host is everyone on, and an out-of-band exchange
// (all-gather) and barrier through whatever started the job.
//
// A Bootstrap is produced by a spawner-specific implementation:
//
//   - the launcher's Unix socket (gexrun and the in-test launcher), see Connect;
//   - a job of one rank when the program was started without a launcher, see Singleton;
//   - a PMI process manager (MPICH hydra, Slurm srun --mpi=pmi2), see PMIFromEnv;
//   - later: ssh-spawned ranks (same wire protocol, relayed).
//
// Conduits consume only the Bootstrap interface, so new spawners slot in
// without change above this package.
//
// The protocol between a rank and the launcher (frames, admission,
// all-gather, exit and abort) is documented in package bootwire; the launcher
// side is launch.Server. A connected rank ends with the job: when the launcher
// says so (another rank called Exit) its OnExit hooks run and it exits with
// the job's code; when the launcher goes away it prints "gexgo: rank R:
// launcher connection lost; exiting" and exits 1.
package boot

import (
	"errors"
	"github.com/gexgo/gexgo/internal/auth"
	"net"
	"os"
	"strconv"
	"time"
)

// Environment variables read by FromEnv. The launcher sets all of them for
// every rank; GEX_HOST may also be set by a user or test to split one machine
// into several pretend hosts.
const (
	EnvRank      = "GEX_RANK"       // this process's job rank, 0..size-1
	EnvSize      = "GEX_SIZE"       // number of ranks in the job
	EnvLocalRank = "GEX_LOCAL_RANK" // index of this rank among the ranks of its host
	EnvBoot      = "GEX_BOOT"       // address of the launcher's bootstrap socket ("@name" = abstract Unix socket)
	EnvJobID     = "GEX_JOBID"      // job identifier, unique per launch (used in names of shared objects)
	EnvHost      = "GEX_HOST"       // host identity override for the nbrhd/host computation
	EnvSecret    = auth.EnvSecret   // the job secret (hex) network connections prove; made by the launcher per job
	// EnvSecretStdin = 1: the secret is the first line of standard input
	// (ranks started through ssh: not on a command line others can read).
	EnvSecretStdin = "GEX_SECRET_STDIN"
)

// Bootstrap is the out-of-band channel every rank has before any conduit is
// up. Its collectives (AllGather, Barrier) must be called by every rank in the
// same order. Implementations are safe for use by one goroutine at a time for
// collectives; Abort and Exit may be called from any goroutine.
type Bootstrap interface {
	// Rank is this process's job rank, in [0, Size()).
	Rank() int
	// Size is the number of ranks in the job (>= 1).
	Size() int
	// JobID identifies this launch; it is unique among concurrently running jobs
	// of this host and safe to embed in object names ([A-Za-z0-9_-]).
	JobID() string
	// Host is this rank's host identity: the value of GEX_HOST if set, else
	// the machine's hostname. Ranks with equal Host strings share a host.
	Host() string

	// AllGather contributes mine and returns every rank's contribution,
	// indexed by rank. Contributions may differ in length. The returned slices
	// are owned by the caller.
	AllGather(mine []byte) ([][]byte, error)
	// Barrier returns once every rank has entered it.
	Barrier() error

	// Exit asks the launcher to end the whole job with the given exit code
	// (gasnet_exit semantics: every rank ends with that code). It does not return:
	// it exits this process with code once the launcher acknowledged (or after a
	// short grace period if it cannot be reached).
	Exit(code int)
	// Abort reports a fatal error for this rank (msg is printed by the
	// launcher) and exits this process non-zero. It does not return.
	Abort(msg string)

	// OnExit registers fn to run before this process exits because the job is
	// ending (another rank called Exit, the launcher went away, or Abort).
	// Used to release resources; fn must be quick and must not block.
	OnExit(fn func())

	// Close releases the bootstrap channel. After Close, collectives fail.
	Close() error
}

// ErrClosed is returned by collectives on a closed Bootstrap.
var ErrClosed = errors.New("boot: bootstrap is closed")

// FromEnv returns the Bootstrap for this process: a connection to the launcher
// when GEX_BOOT is set, else the PMI process manager when PMI_FD or PMI_PORT
// is set (PMIFromEnv), otherwise a job of one rank (Singleton).
func FromEnv() (Bootstrap, error) {
	if os.Getenv(EnvSecretStdin) == "1" && os.Getenv(EnvSecret) == "" {
		if err := secretFromStdin(); err != nil {
			return nil, err
		}
	}
	if addr := os.Getenv(EnvBoot); addr != "" {
		rank, err := envInt(EnvRank)
		if err != nil {
			return nil, err
		}
		size, err := envInt(EnvSize)
		if err != nil {
			return nil, err
		}
		return Connect(addr, rank, size, os.Getenv(EnvJobID), HostIdentity())
	}
	if os.Getenv(EnvPMIFD) != "" || os.Getenv(EnvPMIPort) != "" {
		return PMIFromEnv()
	}
	return Singleton(HostIdentity()), nil
}

// secretFromStdin reads the job secret from the first line of standard input
// into EnvSecret, for the conduit and the bootstrap.
func secretFromStdin() error {
	line := make(chan string, 1)
	go func() {
		var b []byte
		var c [1]byte
		for len(b) < 256 {
			n, err := os.Stdin.Read(c[:])
			if n == 0 || err != nil || c[0] == '\n' {
				break
			}
			b = append(b, c[0])
		}
		line <- string(b)
	}()
	select {
	case s := <-line:
		if s == "" {
			return errors.New("boot: " + EnvSecretStdin + "=1 but standard input holds no secret")
		}
		return os.Setenv(EnvSecret, s)
	case <-time.After(DialTimeout):
		return errors.New("boot: " + EnvSecretStdin + "=1 but no secret arrived on standard input")
	}
}

// HostAddr is this host's address for network traffic of a job: the first
// IPv4 address its name resolves to that is not loopback, else 127.0.0.1.
func HostAddr() string {
	if name, err := os.Hostname(); err == nil {
		if ips, err := net.LookupIP(name); err == nil {
			for _, ip := range ips {
				if !ip.IsLoopback() && ip.To4() != nil {
					return ip.String()
				}
			}
		}
	}
	return "127.0.0.1"
}

// HostIdentity returns GEX_HOST if set, else the hostname.
func HostIdentity() string {
	if h := os.Getenv(EnvHost); h != "" {
		return h
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}

func envInt(name string) (int, error) {
	v := os.Getenv(name)
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errors.New("boot: environment variable " + name + "=" + strconv.Quote(v) + " is not a non-negative integer")
	}
	return n, nil
}
