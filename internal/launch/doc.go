// Package launch starts and supervises a job of N ranks on this machine: the
// library behind cmd/gexrun and the multi-rank tests (internal/spmdtest).
//
// # A job
//
// Run starts N processes of one program. Every rank gets the launcher's
// environment, Config.Env, and
//
//	GEX_RANK        its rank, 0..N-1
//	GEX_SIZE        N
//	GEX_LOCAL_RANK  its index among the ranks with the same host identity
//	GEX_BOOT        the bootstrap address, "@gexgo-<jobid>"
//	GEX_JOBID       the job id
//	GEX_HOST        "<hostname>-h<k>" when Config.PretendHosts > 1
//	GEX_SECRET      a random 32-byte secret of this job (hex), which the tcp
//	                conduit's connections prove before any AM is accepted
//
// A rank runs in its own process group (so a terminal's SIGINT reaches only
// the launcher, which forwards it, and a rank's own children can be killed
// with it) with PR_SET_PDEATHSIG=SIGKILL (it dies with the launcher), stdin
// from /dev/null, and stdout/stderr forwarded line by line, optionally
// labelled "[R] ".
//
// # Ending
//
// The job ends when every rank has exited. It ends early, with exactly one
// line of explanation on stderr, when
//
//   - a rank exits non-zero or is killed by a signal ("gexrun: rank R (pid P)
//     exited with status S; terminating the job" or "... was killed by signal
//     SIGKILL; terminating the job"): the other ranks' process groups get
//     SIGTERM, then SIGKILL after Config.Grace;
//   - a rank leaves the job early: its process ends (any status) without
//     having called Close (FINALIZE) while other ranks that joined are still
//     in it ("gexrun: rank R (pid P) exited with status 0 without calling
//     Close; it left while ranks A, B were still running; terminating the
//     job"): the job ends as gasnet_exit with that status would: the
//     connected ranks get PEERLEFT (their waits fail naming R; they exit with
//     the status after Grace/2), the others SIGTERM, all SIGKILL after Grace
//     (leave.go). A rank that exits 0 before any rank joined is judged when
//     one does;
//   - Config.HangTimeout passes without communication progress by any rank
//     while one waits in the library (hang.go): a line per rank says what it
//     waits on, every rank gets SIGQUIT (gex ranks print their stacks), code
//     CodeTimeout;
//   - a rank aborts (boot.Bootstrap.Abort; "gexrun: rank R aborted: msg"):
//     likewise;
//   - a rank requests exit (boot.Bootstrap.Exit, gasnet_exit): every rank is
//     told to exit with that code through the bootstrap socket (EXITNOW);
//     ranks left after Grace are killed; the job's code is that code;
//   - Config.Timeout expires ("gexrun: job timed out after D; killing N
//     ranks", code 124);
//   - the launcher receives SIGINT or SIGTERM: it is forwarded to every rank;
//     ranks left after Grace are killed; a second signal kills at once;
//   - the launcher receives SIGQUIT: it is forwarded to every rank (gex ranks
//     print their goroutine stacks labelled "[rank R] " and exit 2); code
//     128+3.
//
// Run never returns before every rank has been reaped, and each rank's process
// group is killed when the rank exits, while its zombie still pins the group
// id, so a rank's children cannot outlive it within its group. A descendant
// that left its rank's group (setsid) but still carries GEX_JOBID in its
// environment is found in /proc and killed when the job ends ("gexrun:
// killed 1 process that the job left behind ...").
//
// # Bootstrap server
//
// Server implements the launcher side of the bootstrap protocol of package
// bootwire (which documents the frames and the conversation): it admits
// ranks (HELLO checked: rank in range, size equal to the job's, rank not
// already connected, same user), completes all-gathers and barriers, and turns
// EXIT and ABORT into Events for Run. Tests use Listen directly to run ranks as
// goroutines (see package boot).
package launch
