package main

// The flags mpirun users reach for: -np, -x/--env, --output-filename,
// --bind-to, --version; standard input to rank 0; and --pretend-hosts
// selecting the tcp conduit.

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gexgo/gexgo/internal/launch"
	"github.com/gexgo/gexgo/internal/version"
)

// mpirunUsage is the part of --help for these flags.
const mpirunUsage = `  -np N               the same as -n (mpirun's spelling)
  -x VAR[=VALUE]      give every rank VAR (with VALUE, else this environment's value),
                      ranks started through --hosts included; repeatable
  --env VAR[=VALUE]   the same as -x
  --output-filename DIR
                      write rank R's standard output and error to DIR/rank.R instead
                      of the terminal (DIR is created)
  --bind-to core|none core: bind each rank to its share of this machine's CPUs (N
                      consecutive blocks; one CPU each if N exceeds them) and set its
                      GOMAXPROCS to that share unless GOMAXPROCS is set; none: leave
                      placement to the kernel (default none)
  --version           print the version and exit
`

// mpirunNotes is the part of --help that says how standard input and the
// environment reach the ranks.
const mpirunNotes = `
Standard input goes to rank 0 (also through --hosts); every other rank reads
/dev/null, as under mpirun. With --hosts, the GEX_* and GASNET_* variables of
this environment reach every rank; other variables travel with -x. With
--pretend-hosts K > 1 the ranks use the tcp conduit between the pretend hosts
(GEX_CONDUIT=tcp, GEX_TCP_ADDR=127.0.0.1) unless GEX_CONDUIT is set.
`

// mpirunOpts are the parsed flags.
type mpirunOpts struct {
	env       []string // -x and --env, as given
	outputDir string
	bindTo    string
	version   bool
}

// addMpirunFlags defines the flags on fs; n is -n's variable, which -np
// shares.
func addMpirunFlags(fs *flag.FlagSet, n *int) *mpirunOpts {
	o := &mpirunOpts{}
	fs.IntVar(n, "np", 1, "number of ranks (alias of -n)")
	addEnv := func(s string) error {
		o.env = append(o.env, s)
		return nil
	}
	fs.Func("x", "environment variable for every rank", addEnv)
	fs.Func("env", "environment variable for every rank", addEnv)
	fs.StringVar(&o.outputDir, "output-filename", "", "directory of per-rank output files")
	fs.StringVar(&o.bindTo, "bind-to", "none", "core or none")
	fs.BoolVar(&o.version, "version", false, "print the version")
	return o
}

// printVersion prints gexrun's version line.
func printVersion(w io.Writer) { fmt.Fprintln(w, version.String("gexrun")) }

// apply puts the flags into cfg (N, PretendHosts and Hosts already set);
// notes go to stderr. An error is a usage error.
func (o *mpirunOpts) apply(cfg *launch.Config, stdin io.Reader, stderr io.Writer) error {
	for _, e := range o.env {
		kv, err := envAssignment(e, os.LookupEnv)
		if err != nil {
			return err
		}
		cfg.Env = append(cfg.Env, kv)
	}
	switch o.bindTo {
	case "none":
	case "core":
		if len(cfg.Hosts) > 0 {
			return fmt.Errorf("--bind-to core binds ranks on this machine only; with --hosts the ranks run elsewhere")
		}
		cfg.BindCores = true
	default:
		return fmt.Errorf("--bind-to %q: want core or none", o.bindTo)
	}
	if o.outputDir != "" {
		if err := os.MkdirAll(o.outputDir, 0o755); err != nil {
			return fmt.Errorf("--output-filename: %v", err)
		}
		cfg.OutputDir = o.outputDir
	}
	cfg.Stdin = stdin
	if cfg.PretendHosts > 1 {
		conduit, set := lookup(cfg.Env, "GEX_CONDUIT")
		switch {
		case !set:
			cfg.Env = append(cfg.Env, "GEX_CONDUIT=tcp")
			if _, ok := lookup(cfg.Env, "GEX_TCP_ADDR"); !ok {
				cfg.Env = append(cfg.Env, "GEX_TCP_ADDR=127.0.0.1")
			}
		case conduit != "tcp":
			fmt.Fprintf(stderr, "gexrun: note: --pretend-hosts %d with GEX_CONDUIT=%s: the ranks stay on shared memory; the pretend hosts only split the neighbourhoods (unset GEX_CONDUIT or set it to tcp for TCP between them)\n", cfg.PretendHosts, conduit)
		}
	}
	return nil
}

// lookup finds key in env (the last "key=..." wins) and else in this
// process's environment.
func lookup(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return os.LookupEnv(key)
}

// envAssignment turns a -x argument into "VAR=VALUE": VAR=VALUE as given, or
// VAR with the value getenv gives it.
func envAssignment(arg string, getenv func(string) (string, bool)) (string, error) {
	name, _, hasValue := strings.Cut(arg, "=")
	if name == "" || strings.ContainsAny(name, " \t\n\x00") {
		return "", fmt.Errorf("-x %q: want VAR or VAR=VALUE with a non-empty name without spaces", arg)
	}
	if hasValue {
		return arg, nil
	}
	v, ok := getenv(name)
	if !ok {
		return "", fmt.Errorf("-x %s: %s is not set in gexrun's environment (give -x %s=VALUE)", name, name, name)
	}
	return name + "=" + v, nil
}
