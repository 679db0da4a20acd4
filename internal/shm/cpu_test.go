package shm

import (
	"runtime"
	"testing"
)

// TestCurrentCPU: CurrentCPU names a CPU of this machine (plus 1), and the
// one getcpu(2) names on the same locked thread, unless the thread moved
// in between (retried).
func TestCurrentCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for try := 0; ; try++ {
		before := sysCPU()
		got := CurrentCPU()
		after := sysCPU()
		if got < 1 || int(got) > runtime.NumCPU() {
			t.Fatalf("CurrentCPU() = %d, want 1..%d", got, runtime.NumCPU())
		}
		if before == after {
			if got != before+1 {
				t.Fatalf("CurrentCPU() = %d, getcpu(2) says CPU %d (want %d)", got, before, before+1)
			}
			break
		}
		if try == 100 {
			t.Fatal("the thread moved between CPUs on each of 100 tries")
		}
	}
	if _, ok := fastCPU(); ok != rdpidOK {
		t.Fatalf("fastCPU ok = %v, rdpidOK = %v", ok, rdpidOK)
	}
	t.Logf("RDPID used: %v", rdpidOK)
}

// BenchmarkCurrentCPU: RDPID where the CPU has it, against getcpu(2).
func BenchmarkCurrentCPU(b *testing.B) {
	b.Run("CurrentCPU", func(b *testing.B) {
		for b.Loop() {
			CurrentCPU()
		}
	})
	b.Run("getcpu", func(b *testing.B) {
		for b.Loop() {
			sysCPU()
		}
	})
}
