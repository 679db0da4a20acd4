//go:build !amd64

package shm

// fastCPU: no instruction reads the CPU number here; getcpu(2) does.
func fastCPU() (cpu uint32, ok bool) { return 0, false }

// rdpidOK: never, here.
const rdpidOK = false
