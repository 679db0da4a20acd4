package shm

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// membarrier(2) commands (linux/membarrier.h).
const (
	membarrierCmdQuery                   = 0
	membarrierCmdGlobalExpedited         = 1 << 1 // MEMBARRIER_CMD_GLOBAL_EXPEDITED
	membarrierCmdRegisterGlobalExpedited = 1 << 2 // MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED
	membarrierNeed                       = membarrierCmdGlobalExpedited | membarrierCmdRegisterGlobalExpedited
	EnvNoMembarrier                      = "GEXGO_NO_MEMBARRIER"
)

var (
	heavyOnce sync.Once
	heavyOK   bool
)

// EnableHeavyFence registers this process for membarrier(2)
// MEMBARRIER_CMD_GLOBAL_EXPEDITED, once, and reports whether that worked:
// the kernel offers both commands (MEMBARRIER_CMD_QUERY) and accepted the
// registration. It reports false, and registers nothing, when the
// environment sets GEXGO_NO_MEMBARRIER to a non-empty value (the fallback,
// for tests and for comparison). The answer is fixed for the life of the
// process: callers that record it in shared memory for their peers (see
// MsgRing.SetReleaseCommit) may rely on it.
//
// A process that registered may commit MsgRing messages with a release
// store to a consumer that sleeps with Bell.WithHeavyFence; the reasoning is
// at Bell.Sleep.
func EnableHeavyFence() bool {
	heavyOnce.Do(func() {
		if os.Getenv(EnvNoMembarrier) != "" {
			return
		}
		r, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdQuery, 0, 0)
		if errno != 0 || r&membarrierNeed != membarrierNeed {
			return // ENOSYS, a seccomp filter's EPERM, or an old kernel
		}
		if _, _, errno = unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdRegisterGlobalExpedited, 0, 0); errno != 0 {
			return
		}
		heavyOK = true
	})
	return heavyOK
}

// heavyFence issues membarrier(2) MEMBARRIER_CMD_GLOBAL_EXPEDITED: when it
// returns, every running thread of every registered process has executed a
// full memory barrier since the call began (threads not running have passed
// through the scheduler, itself a full barrier). Only after EnableHeavyFence
// reported true; a failure then means a broken invariant and panics.
func heavyFence() {
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierCmdGlobalExpedited, 0, 0); errno != 0 {
		panic("shm: membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED): " + errno.Error())
	}
}
