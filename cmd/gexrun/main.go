// Command gexrun starts a gexgo job: N ranks of one program on this machine,
// connected by the bootstrap socket, supervised until every rank has ended.
//
//	gexrun -n N [--label] [--timeout D] [--grace D] [--pretend-hosts K]
//	       [--hosts H1,H2,... | --hostfile F] [--ssh CMD] [--boot-addr IP] PROGRAM [ARGS...]
//
// PROGRAM is an executable file, a command in PATH, or a Go package path
// (built first, like "go run"). Run "gexrun --help" for the flags and the
// environment variables; the behaviour is that of package internal/launch.
// The exit code is the job's: 0 if every rank exited 0, the code given to
// gasnet_exit / gex.Exit, the status of the first rank that failed, 124 after
// --timeout, 2 for a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gexgo/gexgo/internal/launch"
)

func main() {
	os.Exit(runStdin(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const synopsis = "usage: gexrun -n N [-x VAR[=VALUE]] [--output-filename DIR] [--bind-to core|none] [--label] [--timeout D] [--grace D] [--pretend-hosts K] [--hosts H1,H2,...|--hostfile F] [--ssh CMD] [--boot-addr IP] PROGRAM [ARGS...]"

// usageText is printed by --help. Keep the tables in step with the flags
// and with the environment variables of packages boot, launch and gex.
const usageText = synopsis + `

Starts N ranks of PROGRAM on this machine and waits for them. PROGRAM is an
executable file, a command in PATH, or a Go package path such as
./examples/amping (built first, like "go run"). Flags may be spelled with one
or two dashes and must come before PROGRAM.

Flags:
  -n N                number of ranks, 1..4096 (default 1)
  --label             prefix every line of rank output with "[R] "
  --timeout D         kill the job after D (e.g. 30s, 5m) and exit 124; 0 = no limit (default 0)
  --grace D           time between SIGTERM and SIGKILL when stopping ranks (default 1s)
  --hang-timeout D    end a job in which no rank made communication progress for D: print
                      what each rank waits on, dump every rank's goroutine stacks, exit 124
                      (default 0 = off; e.g. 5m for a job that communicates steadily)
  --pretend-hosts K   split the ranks into K consecutive blocks that act as K hosts
                      (GEX_HOST=<hostname>-h<k>), 0..N (default 0 = one host)
  --hosts H1,H2,...   start the ranks on these hosts through ssh, in blocks (rank r on
                      host r*H/N); PROGRAM must exist at the same path there. The ranks
                      join the bootstrap over TCP proving the job secret, and use the tcp
                      conduit between hosts (GEX_CONDUIT=tcp). Default: $GASNET_SSH_SERVERS
                      (hosts separated by spaces or commas), else this machine only
  --hostfile F        read the hosts from F, one per line ('#' starts a comment)
  --ssh CMD           the remote shell, split at spaces (default $GASNET_SSH_CMD, else
                      "ssh -o BatchMode=yes"); any command taking a host and a command
  --boot-addr IP      the address the TCP bootstrap listens on for --hosts (default: the
                      address this host's name resolves to)
  --help              print this text
` + mpirunUsage + `
When a rank's process ends while other ranks are still in the job (it exited
non-zero, was killed, or exited 0 without calling Close), gexrun prints one line
naming it, its status and the ranks still running, ends the job as gasnet_exit
with that status would (the others' pending waits fail naming the rank, then
they exit; SIGKILL after --grace) and exits with the rank's status. A rank that
ends after Close ends normally. SIGINT and SIGTERM are forwarded to every rank;
a second one kills them. SIGQUIT is forwarded too: every rank prints its
goroutine stacks, each line prefixed "[rank R] ", and exits. Exit codes: 0 if
every rank exited 0; the code passed to exit by a rank (gasnet_exit); the failing rank's status (1 if killed or
aborted); 124 after --timeout; 128+signal after a forwarded signal if a rank
then failed; 2 for a usage error.
` + mpirunNotes + `

Environment set by gexrun for every rank:
  GEX_RANK                  this rank, 0..N-1
  GEX_SIZE                  N
  GEX_LOCAL_RANK            index of this rank among the ranks of its host
  GEX_BOOT                  bootstrap socket of the job ("@gexgo-<jobid>", abstract Unix socket)
  GEX_JOBID                 job identifier, unique per launch
  GEX_HOST                  host identity (set with --pretend-hosts; a user may set it to
                            override the hostname in the nbrhd/host computation)
  GEX_SECRET                a random per-job secret (hex) that every tcp conduit
                            connection proves before any AM is accepted

Environment read by the library in each rank:
  GASNET_MAX_SEGSIZE        maximum segment size per process: a size ("64MB", "1GB") or a
                            fraction of physical memory shared among the host's ranks ("0.5/H")
  GASNET_SUPERNODE_MAXSIZE  maximum ranks per neighbourhood (nbrhd); 1 = no shared-memory RMA
                            between ranks
  GEX_WAITMODE              how blocking calls wait: spin, block or spinblock (default spinblock)
  GEX_RCVTHREAD             1 = start a receive goroutine that runs handlers while the
                            application computes
  GEX_VERBOSE               1 = print non-fatal errors
  GEX_CONDUIT               smp (default; every rank on this machine) or tcp (ranks on
                            other hosts over TCP, shared memory inside each host)
  GEX_TCP_ADDR              tcp: the IP address this rank listens on (default: this host's
                            address); never all interfaces
  GEX_TCP_TIMEOUT           tcp: how long connecting to a peer may take (default 30s)
`

// run is gexrun with its arguments and output streams, every rank reading
// /dev/null; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runStdin(ctx, args, nil, stdout, stderr)
}

// runStdin is gexrun with rank 0 reading stdin (nil: /dev/null).
func runStdin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gexrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // errors are reported below
	n := fs.Int("n", 1, "number of ranks")
	label := fs.Bool("label", false, "prefix output lines with [R]")
	timeout := fs.Duration("timeout", 0, "job time limit")
	grace := fs.Duration("grace", launch.DefaultGrace, "time between SIGTERM and SIGKILL")
	hosts := fs.Int("pretend-hosts", 0, "number of pretend hosts")
	hostList := fs.String("hosts", "", "hosts to start ranks on through ssh")
	hostFile := fs.String("hostfile", "", "file listing the hosts")
	sshCmd := fs.String("ssh", "", "remote shell command")
	bootAddr := fs.String("boot-addr", "", "TCP bootstrap address")
	hangTimeout := fs.Duration("hang-timeout", 0, "end the job after D without communication progress")
	mo := addMpirunFlags(fs, n)
	nsHosts := netnsFlag(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageText, "\nNetwork namespaces:\n", netnsUsage)
			return 0
		}
		// The flag package has printed the error.
		fmt.Fprintf(stderr, "%s\nRun 'gexrun --help' for details.\n", synopsis)
		return launch.CodeUsage
	}
	if mo.version {
		printVersion(stdout)
		return 0
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "gexrun: "+format+"\n%s\nRun 'gexrun --help' for details.\n", append(a, synopsis)...)
		return launch.CodeUsage
	}
	switch {
	case *n < 1 || *n > launch.MaxRanks:
		return usageErr("-n %d is out of range [1, %d]", *n, launch.MaxRanks)
	case *timeout < 0:
		return usageErr("--timeout %v is negative", *timeout)
	case *grace <= 0:
		return usageErr("--grace %v must be positive", *grace)
	case *hangTimeout < 0:
		return usageErr("--hang-timeout %v is negative", *hangTimeout)
	case *hosts < 0 || *hosts > *n:
		return usageErr("--pretend-hosts %d is out of range [0, -n = %d]", *hosts, *n)
	case fs.NArg() == 0:
		return usageErr("no PROGRAM given")
	case *hostList != "" && *hostFile != "":
		return usageErr("--hosts and --hostfile are exclusive")
	}
	remote, err := remoteHosts(*hostList, *hostFile)
	if err != nil {
		return usageErr("%v", err)
	}
	if len(remote) > 0 && *hosts > 0 {
		return usageErr("--pretend-hosts and --hosts are exclusive")
	}
	ssh := strings.Fields(*sshCmd)
	if len(ssh) == 0 {
		ssh = strings.Fields(os.Getenv("GASNET_SSH_CMD"))
	}
	cfg := launch.Config{
		N:            *n,
		Program:      fs.Arg(0),
		Args:         fs.Args()[1:],
		Label:        *label,
		Timeout:      *timeout,
		Grace:        *grace,
		PretendHosts: *hosts,
		Hosts:        remote,
		SSH:          ssh,
		BootAddr:     *bootAddr,
		HangTimeout:  *hangTimeout,
		Stdout:       stdout,
		Stderr:       stderr,
	}
	if err := mo.apply(&cfg, stdin, stderr); err != nil {
		return usageErr("%v", err)
	}
	code, _ := runNetns(ctx, *nsHosts, cfg, stderr)
	return code
}

// remoteHosts is the host list of --hosts, --hostfile or GASNET_SSH_SERVERS
// (empty: this machine only).
func remoteHosts(list, file string) ([]string, error) {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	}
	switch {
	case list != "":
		return split(list), nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--hostfile: %v", err)
		}
		var hs []string
		for _, line := range strings.Split(string(b), "\n") {
			line, _, _ = strings.Cut(line, "#")
			hs = append(hs, strings.Fields(line)...)
		}
		if len(hs) == 0 {
			return nil, fmt.Errorf("--hostfile %s lists no hosts", file)
		}
		return hs, nil
	}
	return split(os.Getenv("GASNET_SSH_SERVERS")), nil
}
