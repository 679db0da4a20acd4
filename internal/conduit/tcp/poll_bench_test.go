package tcp

import (
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/internal/conduit"
)

// BenchmarkPollEmpty is the cost of one Poll of a quiet connection: what a
// busy-polling wait spends per empty poll. BenchmarkReadEmpty is its floor,
// the read(2) of the same empty socket alone; the difference is the
// library's own work per poll (docs/tcp.md, seventh campaign).
func BenchmarkPollEmpty(b *testing.B) {
	trs := pairTransports(b, func(int, *Transport) conduit.Delivery { return func(*conduit.Incoming) {} })
	tr := trs[0]
	b.ResetTimer()
	for range b.N {
		if tr.Poll(false, tr.d) != 0 {
			b.Fatal("an AM arrived")
		}
	}
}

func BenchmarkReadEmpty(b *testing.B) {
	trs := pairTransports(b, func(int, *Transport) conduit.Delivery { return func(*conduit.Incoming) {} })
	l := trs[0].links[0]
	buf := make([]byte, rxBufSize)
	b.ResetTimer()
	for range b.N {
		readNB(l.fd, buf)
	}
}

// BenchmarkShortRoundTrip: a Short request answered by a Short reply from
// its handler, rank 1 polling on its own goroutine, rank 0 busy-polling
// for the reply (an AM Short round trip without gex above the transport).
func BenchmarkShortRoundTrip(b *testing.B) { shortRoundTrip(b, 2) }

// shortRoundTrip is BenchmarkShortRoundTrip between ranks 0 and 1 of n
// joined in a mesh (meshTransports); the others stay quiet.
func shortRoundTrip(b *testing.B, n int) {
	var replies atomic.Int64
	trs := meshTransports(b, n, func(r int, tr *Transport) conduit.Delivery {
		return func(in *conduit.Incoming) {
			if !in.IsReq {
				replies.Add(1)
				return
			}
			tr.Send(in.Src, conduit.Header{Cat: conduit.Short, Handler: 2}, nil, 0)
		}
	})
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			trs[1].Poll(false, trs[1].d)
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := trs[0].Send(1, conduit.Header{Cat: conduit.Short, IsReq: true, Handler: 1}, nil, 0); err != nil {
			b.Fatal(err)
		}
		for replies.Load() <= int64(i) {
			trs[0].Poll(false, trs[0].d)
		}
	}
	b.StopTimer()
	stop.Store(true)
	<-done
}

// BenchmarkRawRoundTrip is BenchmarkShortRoundTrip's floor: 8 bytes written
// and echoed back over the same kind of connection with plain write(2) and
// busy-polled non-blocking read(2), as gexbench's raw ping-pong.
func BenchmarkRawRoundTrip(b *testing.B) {
	trs := pairTransports(b, func(int, *Transport) conduit.Delivery { return func(*conduit.Incoming) {} })
	fa, fb := trs[0].links[0].fd, trs[1].links[0].fd
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 8)
		for !stop.Load() {
			if n, _ := readNB(fb, buf); n == 8 {
				unix.Write(fb, buf)
			}
		}
	}()
	buf := make([]byte, 8)
	b.ResetTimer()
	for range b.N {
		unix.Write(fa, buf)
		for {
			if n, _ := readNB(fa, buf); n == 8 {
				break
			}
		}
	}
	b.StopTimer()
	stop.Store(true)
	<-done
}

// BenchmarkEpollRearm and BenchmarkEpollAddRemove are the two ways the
// waker can keep a socket between sleeps (waker.go, dropAfter): re-arming
// its one-shot entry in place (EPOLL_CTL_MOD), or adding the socket at an
// arming and removing it again (EPOLL_CTL_ADD + EPOLL_CTL_DEL).
func BenchmarkEpollRearm(b *testing.B) { epollArming(b, false) }

func BenchmarkEpollAddRemove(b *testing.B) { epollArming(b, true) }

func epollArming(b *testing.B, addRemove bool) {
	trs := pairTransports(b, func(int, *Transport) conduit.Delivery { return func(*conduit.Incoming) {} })
	sock := trs[0].links[0].sock
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(epfd)
	ev := unix.EpollEvent{Events: armed, Fd: int32(sock)}
	if !addRemove {
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, sock, &ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if addRemove {
			if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, sock, &ev); err != nil {
				b.Fatal(err)
			}
			if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_DEL, sock, nil); err != nil {
				b.Fatal(err)
			}
		} else if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_MOD, sock, &ev); err != nil {
			b.Fatal(err)
		}
	}
}
