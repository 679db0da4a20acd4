package boot

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Under a PMI process manager a rank that leaves the job early must not take
// its survivors with it before they could say so. MPICH's hydra kills every
// rank (SIGKILL) as soon as the PMI connection of a rank that used PMI closes
// without finalize (pmip_cb.c: "If a PMI application terminates, we clean up
// the remaining processes"), which, for a rank that just returned from main,
// is the moment its process ends.
//
// So each rank starts a holder: a tiny /bin/sh child that keeps a duplicate of
// the PMI connection open and reads a pipe from the rank. A rank that ends
// the normal way (Close, Exit, Abort) first writes "F" to the pipe and the
// holder lets go at once. A rank that ends any other way closes the pipe by
// ending; the holder then keeps the connection open for at most 2 s
// (holderScript), which gives the other ranks of the host the time to see the
// rank's process end (smp conduit, liveness.go), fail their waits naming it
// and say so; then they kill the holder (HolderPID) and end.

// holderScript is the holder: it reads the rank's pipe: "P pid..." names the
// processes of the rank's peers on this host (HoldFor), "F" (the normal end)
// lets go at once. At the end of the pipe without "F" it keeps the
// connection (fd 3) for at most 2 s (20 x 0.1 s), and only while one of
// those peers runs (a zombie has ended), so that nothing is left once the
// job is over. Its
// sleeps do not inherit the connection, so killing the holder releases it at
// once.
const holderScript = `p=; while IFS= read -r x; do case $x in F) exit 0;; P*) p=${x#P};; esac; done; n=0; ` +
	`while [ $n -lt 20 ]; do a=; for q in $p; do s=; read -r s < /proc/$q/stat 2>/dev/null; ` +
	`case $s in ""|*") Z "*|*") X "*) ;; *) a=1;; esac; done; ` +
	`[ -n "$a" ] || exit 0; sleep 0.1 3>&-; n=$((n+1)); done`

// pmiHolder is the rank's end of its holder.
type pmiHolder struct {
	mu   sync.Mutex // guards w and done
	w    *os.File   // the pipe the holder reads; "F\n" = normal end
	done bool
	pid  int
}

// startHolder starts the holder of conn, or returns nil if it cannot (no
// /bin/sh, a connection without a file descriptor): then a rank that leaves
// early is seen by hydra at once, as before.
func startHolder(conn pmiConn) *pmiHolder {
	var f *os.File
	var err error
	switch c := conn.(type) {
	case *net.UnixConn:
		f, err = c.File()
	case *net.TCPConn:
		f, err = c.File()
	case *os.File:
		f = c
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	if f != conn {
		defer f.Close() // the holder has its own copy
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", holderScript, "gexgo-pmi-holder")
	cmd.Stdin = r
	cmd.ExtraFiles = []*os.File{f} // fd 3: the PMI connection, held
	cmd.Env = []string{}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil
	}
	go cmd.Wait() // reap it
	return &pmiHolder{w: w, pid: cmd.Process.Pid}
}

// HolderPID is the process id of the holder of b's PMI connection, or 0
// (not PMI, or no holder). The ranks that see a peer leave early kill the
// peer's holder once they have said so, so that the process manager ends
// the job at once rather than after pmiHoldTime.
func HolderPID(b Bootstrap) int {
	if p, ok := b.(*pmiBoot); ok && p.holder != nil {
		return p.holder.pid
	}
	return 0
}

// Leave ends this rank because another rank left the job early (the smp
// conduit saw it): the OnExit hooks run, the holder lets go, and the process
// exits with code without finalize, so the process manager ends whatever is
// left of the job at once. Neither finalize (the job would wait for the
// leaver's holder) nor abort (hydra 4.0 does not know PMI-2's abort and
// stops without forwarding the ranks' last output) is sent.
func (b *pmiBoot) Leave(code int) { b.finish(code, nil) }

// HoldFor tells b's holder (if any) the processes of the rank's peers on
// this host: once the rank has ended early, it holds the PMI connection only
// while one of them lives.
func HoldFor(b Bootstrap, pids []int) {
	p, ok := b.(*pmiBoot)
	if !ok || p.holder == nil {
		return
	}
	var sb strings.Builder
	sb.WriteString("P")
	for _, pid := range pids {
		if pid > 0 && pid != os.Getpid() {
			sb.WriteString(" " + strconv.Itoa(pid))
		}
	}
	p.holder.mu.Lock()
	defer p.holder.mu.Unlock()
	if !p.holder.done {
		p.holder.w.WriteString(sb.String() + "\n")
	}
}

// release tells the holder that the rank ends the normal way.
func (h *pmiHolder) release() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.done = true
		h.w.WriteString("F\n")
		h.w.Close()
	}
}
