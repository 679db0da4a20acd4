package shm

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func testName(t *testing.T) string {
	return fmt.Sprintf("gexgo-shm-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), os.Getpid())
}

func TestMemfdCreate(t *testing.T) {
	ps := os.Getpagesize()
	r, err := Memfd{}.Create(testName(t), ps+1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := r.Bytes()
	if len(b) != 2*ps || r.Desc().Size != uint64(2*ps) {
		t.Errorf("size %d / desc %d, want %d", len(b), r.Desc().Size, 2*ps)
	}
	if addrOf(b)%MemfdAlign != 0 {
		t.Errorf("mapping at %#x not page aligned", addrOf(b))
	}
	for i, c := range b {
		if c != 0 {
			t.Fatalf("byte %d = %d, not zero-filled", i, c)
		}
	}
	d := r.Desc()
	if d.Kind != DescMemfd || d.PID != int32(os.Getpid()) || d.FD != int32(r.fd) {
		t.Errorf("desc %v", d)
	}
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o600 {
		t.Errorf("mode %#o, want 0600", st.Mode&0o7777)
	}
	if st.Size != int64(2*ps) {
		t.Errorf("file size %d", st.Size)
	}
	if fl, err := unix.FcntlInt(uintptr(r.fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
		t.Errorf("fd flags %#x, %v: want FD_CLOEXEC", fl, err)
	}
}

// Nothing may appear in a file system: the region is reachable only through
// the fd.
func TestMemfdNothingInDevShm(t *testing.T) {
	name := testName(t)
	r, err := Memfd{}.Create(name, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ents, err := os.ReadDir("/dev/shm"); err == nil {
		for _, e := range ents {
			if strings.Contains(e.Name(), name) {
				t.Errorf("/dev/shm/%s exists", e.Name())
			}
		}
	}
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(r.fd))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, "/memfd:"+name) {
		t.Errorf("fd links to %q, want /memfd:%s", link, name)
	}
}

func TestMemfdOpenSharesMemory(t *testing.T) {
	r1, err := Memfd{}.Create(testName(t), 8192)
	if err != nil {
		t.Fatal(err)
	}
	db, err := r1.Desc().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var d Desc
	if err := d.UnmarshalBinary(db); err != nil {
		t.Fatal(err)
	}
	r2, err := Memfd{}.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	b1, b2 := r1.Bytes(), r2.Bytes()
	if len(b2) != len(b1) || r2.Desc() != r1.Desc() {
		t.Fatalf("opened %d bytes, desc %v; want %d, %v", len(b2), r2.Desc(), len(b1), r1.Desc())
	}
	if addrOf(b1) == addrOf(b2) {
		t.Fatal("Open returned the same mapping, not a second one")
	}
	b1[100] = 7
	b1[8191] = 9
	if b2[100] != 7 || b2[8191] != 9 {
		t.Error("second mapping does not see writes of the first")
	}
	Uint64At(b2, 64).Add(5)
	if Uint64At(b1, 64).Load() != 5 {
		t.Error("first mapping does not see atomic add through the second")
	}
	// The owner going away leaves the peer's mapping valid.
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	b2[0] = 1
	if Uint64At(b2, 64).Load() != 5 {
		t.Error("peer mapping lost its contents after the owner closed")
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if r2.Bytes() != nil {
		t.Error("Bytes after Close not nil")
	}
}

func TestMemfdOpenRejects(t *testing.T) {
	r, err := Memfd{}.Create(testName(t), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pid := int32(os.Getpid())
	big := r.Desc()
	big.Size = 8192 // larger than the file: mapping it could SIGBUS
	for _, c := range []struct {
		name string
		d    Desc
	}{
		{"zero", Desc{}},
		{"heap kind", Desc{Kind: DescHeap, Size: 4096, ID: 1}},
		{"too big", big},
		{"not a memfd", Desc{Kind: DescMemfd, PID: pid, FD: int32(f.Fd()), Size: 1}},
		{"no such fd", Desc{Kind: DescMemfd, PID: pid, FD: 1 << 30, Size: 1}},
		{"no such pid", Desc{Kind: DescMemfd, PID: 1<<31 - 1, FD: 3, Size: 1}},
	} {
		if r2, err := (Memfd{}).Open(c.d); err == nil {
			r2.Close()
			t.Errorf("%s: Open(%v) succeeded", c.name, c.d)
		}
	}
}

func TestCreateRejectsSize(t *testing.T) {
	for _, a := range []Allocator{Memfd{}, NewHeap()} {
		for _, n := range []int{0, -1} {
			if r, err := a.Create("x", n); err == nil {
				r.Close()
				t.Errorf("%T.Create(%d) succeeded", a, n)
			}
		}
	}
}

func TestHeap(t *testing.T) {
	h := NewHeap()
	r1, err := h.Create("a", 100)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := h.Create("b", 5000)
	if err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	if len(r1.Bytes()) != ps || len(r2.Bytes()) != 2*ps {
		t.Errorf("sizes %d %d", len(r1.Bytes()), len(r2.Bytes()))
	}
	for _, r := range []*Region{r1, r2} {
		if addrOf(r.Bytes())%HeapAlign != 0 {
			t.Errorf("heap region at %#x not %d-byte aligned", addrOf(r.Bytes()), HeapAlign)
		}
		if cap(r.Bytes()) != len(r.Bytes()) {
			t.Error("cap != len")
		}
	}
	if r1.Desc().ID == r2.Desc().ID || r1.Desc().Kind != DescHeap {
		t.Errorf("descs %v %v", r1.Desc(), r2.Desc())
	}
	o, err := h.Open(r2.Desc())
	if err != nil {
		t.Fatal(err)
	}
	r2.Bytes()[4999] = 3
	if o.Bytes()[4999] != 3 || &o.Bytes()[0] != &r2.Bytes()[0] {
		t.Error("Open does not return the same memory")
	}
	bad := r2.Desc()
	bad.Size++
	if _, err := h.Open(bad); err == nil {
		t.Error("Open with wrong size succeeded")
	}
	if _, err := NewHeap().Open(r1.Desc()); err == nil {
		t.Error("Open in another Heap succeeded")
	}
	if _, err := h.Open(Desc{Kind: DescMemfd, PID: 1, FD: 1, Size: 4096}); err == nil {
		t.Error("Heap.Open of a memfd Desc succeeded")
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(r2.Desc()); err != nil {
		t.Error("a peer's Close removed the region:", err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Open(r2.Desc()); err == nil {
		t.Error("Open after the owner's Close succeeded")
	}
	if err := r2.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	r1.Close()
}
