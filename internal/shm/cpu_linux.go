package shm

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// CurrentCPU returns the number of the CPU the calling thread runs on,
// plus 1 (0 if it cannot be told). The thread may move right after: it is
// a hint, for spreading work or deciding whom to yield to. RDPID where
// the CPU has it (a few cycles), else getcpu(2) (a system call: about
// 170 ns in a VM).
func CurrentCPU() uint32 {
	if cpu, ok := fastCPU(); ok {
		return cpu + 1
	}
	if cpu := sysCPU(); cpu != noCPU {
		return cpu + 1
	}
	return 0
}

const noCPU = ^uint32(0)

// sysCPU is getcpu(2)'s CPU number, or noCPU if the call failed.
func sysCPU() uint32 {
	var cpu, node uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), uintptr(unsafe.Pointer(&node)), 0); e != 0 {
		return noCPU
	}
	return cpu
}
