package gex

import "golang.org/x/sys/unix"

// sysYield is sched_yield(2): the calling thread goes to the back of the run
// queue, so another process on this CPU can run.
func sysYield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
