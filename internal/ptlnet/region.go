package ptlnet

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/shm"
)

// Shared regions. Each side of a same-node connection creates, for that
// connection, a transmit region (sender-owned: the ring it produces into and
// the pool its bulk payloads go through), and once per Net a doorbell page.
// Both are memfds sealed against shrinking and growing, passed by SCM_RIGHTS;
// the receiver checks the seals and the size before mapping, so a peer can
// never make an access inside the mapping fault.
//
// Doorbell page:
//
//	0   4  magic "PTLB"
//	4   4  version 2
//	8   4  fenced: bellFencedYes if the owner's Bell.Sleep issues the
//	       asymmetric fence (shm.Bell.WithHeavyFence), 0 otherwise; written
//	       before the page is passed to any peer, never changed
//	64  8  shm.Bell: the owner's futex doorbell
//
// Transmit region (offsets from its start):
//
//	0     4  magic "PTLT"
//	4     4  version 2
//	64    4  blocked: the sender has queued messages and wants its doorbell rung
//	         when the receiver frees room (sender stores 1, receiver swaps to 0)
//	256      shm.MsgRing: txSlots slots of 64 bytes (shm.MsgSlotSize)
//	poolOff  shm pool: txBufs buffers of txBufSize bytes
//
// Version 2 replaced version 1's fixed-slot ring (shm.Ring, 1024 slots of 256
// bytes) by the variable-length message ring in the same 256 KiB.
const (
	bellMagic      = 0x424c5450 // "PTLB"
	txMagic        = 0x544c5450 // "PTLT"
	regionVersion  = 2
	bellOffFenced  = 8
	bellFencedYes  = 1
	bellOff        = 64
	bellRegionSize = 4096

	txOffBlocked = 64
	txOffRing    = 256
	txSlots      = 4096
	txBufs       = 16
	txBufSize    = 256 << 10

	// txEagerMax is the largest eager frame (frame header, hdr and
	// payload): four 64-byte slots less the ring's 8-byte message word, the
	// 248 bytes of version 1's slot, so that a MaxHeaderSize hdr fits with
	// its frame header and the eager/bulk split is unchanged.
	txEagerMax = 4*shm.MsgSlotSize - 8
)

var (
	txPoolOff    = txOffRing + shm.MsgRingBytes(txSlots)
	txRegionSize = txPoolOff + shm.PoolBytes(txBufs, txBufSize)
)

func putRegionHeader(b []byte, magic uint32) {
	binary.LittleEndian.PutUint32(b[4:], regionVersion)
	shm.Uint32At(b, 0).Store(magic)
}

func checkRegionHeader(b []byte, magic uint32) error {
	if len(b) < 64 || shm.Uint32At(b, 0).Load() != magic || binary.LittleEndian.Uint32(b[4:]) != regionVersion {
		return errors.New("ptlnet: peer region has a bad magic or version")
	}
	return nil
}

const seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// createSealed makes a memfd of size bytes, seals its size and maps it.
func createSealed(name string, size int) (fd int, mem []byte, err error) {
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, os.NewSyscallError("memfd_create", err)
	}
	fail := func(op string, e error) (int, []byte, error) {
		unix.Close(fd)
		return -1, nil, os.NewSyscallError(op, e)
	}
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fail("fchmod", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return fail("fcntl(F_ADD_SEALS)", err)
	}
	mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	return fd, mem, nil
}

// mapSealed maps a peer's memfd of exactly size bytes after checking that it
// is a memfd sealed against shrinking; it closes fd in every case.
func mapSealed(fd int, size int) ([]byte, error) {
	defer unix.Close(fd)
	s, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, errors.New("ptlnet: peer passed a descriptor that is not a memfd")
	}
	if s&unix.F_SEAL_SHRINK == 0 {
		return nil, errors.New("ptlnet: peer memfd is not sealed against shrinking")
	}
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || !strings.HasPrefix(link, "/memfd:") {
		return nil, errors.New("ptlnet: peer passed a descriptor that is not a memfd")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, os.NewSyscallError("fstat", err)
	}
	if st.Size != int64(size) {
		return nil, errors.New("ptlnet: peer memfd has " + strconv.FormatInt(st.Size, 10) + " bytes, want " + strconv.Itoa(size))
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return mem, nil
}

// unmapClose unmaps mem and closes fd (either may be absent).
func unmapClose(fd int, mem []byte) {
	if mem != nil {
		unix.Munmap(mem)
	}
	if fd >= 0 {
		unix.Close(fd)
	}
}
