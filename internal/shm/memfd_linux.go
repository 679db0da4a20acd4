package shm

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Memfd allocates regions as anonymous memory files (memfd_create(2)) mapped
// MAP_SHARED. Nothing is ever created in /dev/shm or another file system, so
// no file can outlive a crash: the memory goes when the last mapping and fd go.
//
// Peers reach a region through the owner's fd as /proc/<pid>/fd/<fd>, which
// needs the same uid (ptrace read access to the owner). The owner must keep
// the Region open until every peer has opened it.
type Memfd struct{}

// Create makes a memfd named name (visible in /proc/<pid>/maps as
// "/memfd:<name>"), mode 0600, of size rounded up to the page size, and maps
// it read-write.
func (Memfd) Create(name string, size int) (*Region, error) {
	n, err := roundSize(size)
	if err != nil {
		return nil, err
	}
	// MFD_NOEXEC_SEAL (Linux 6.3) keeps vm.memfd_noexec=2 systems happy;
	// older kernels reject the flag with EINVAL.
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_NOEXEC_SEAL)
	if err == unix.EINVAL {
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	}
	if err != nil {
		return nil, os.NewSyscallError("memfd_create", err)
	}
	fail := func(op string, e error) (*Region, error) {
		unix.Close(fd)
		return nil, os.NewSyscallError(op, e)
	}
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fail("fchmod", err)
	}
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		return fail("ftruncate", err)
	}
	b, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	d := Desc{Kind: DescMemfd, PID: int32(os.Getpid()), FD: int32(fd), Size: uint64(n)}
	return &Region{b: b, desc: d, fd: fd, mapped: true}, nil
}

// Open maps the memfd region d describes: it opens /proc/<PID>/fd/<FD>
// read-write, checks that it is a memfd of at least d.Size bytes (so that no
// access inside the mapping can fault), maps d.Size bytes MAP_SHARED and closes
// the opened fd (the mapping stays).
func (Memfd) Open(d Desc) (*Region, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	if d.Kind != DescMemfd {
		return nil, formatErr("desc", "Kind", strconv.Itoa(int(d.Kind))+": Memfd.Open needs DescMemfd")
	}
	path := "/proc/" + strconv.Itoa(int(d.PID)) + "/fd/" + strconv.Itoa(int(d.FD))
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	// Check the file we actually opened, not the peer's fd number (which may
	// have been reused for something else).
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || !strings.HasPrefix(link, "/memfd:") {
		return nil, formatErr("region", "FD", path+" is not a memfd ("+link+")")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, os.NewSyscallError("fstat", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < 0 || uint64(st.Size) < d.Size {
		return nil, formatErr("region", "Size", strconv.FormatUint(d.Size, 10)+": "+path+" has "+
			strconv.FormatInt(st.Size, 10)+" bytes")
	}
	b, err := unix.Mmap(fd, 0, int(d.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, os.NewSyscallError("mmap", err)
	}
	return &Region{b: b, desc: d, fd: -1, mapped: true}, nil
}
