package shm

func hasRDPID() bool

func rdpid() uint32

// fastCPU is the CPU number from RDPID (IA32_TSC_AUX's low 12 bits, as
// Linux sets it), if the CPU has the instruction; ok is false otherwise.
func fastCPU() (cpu uint32, ok bool) {
	if !rdpidOK {
		return 0, false
	}
	return rdpid() & 0xfff, true
}

// rdpidOK: the CPU has RDPID and, checked once against getcpu(2), the
// kernel keeps the CPU number where RDPID reads it.
var rdpidOK = hasRDPID() && rdpid()&0xfff == sysCPU()
