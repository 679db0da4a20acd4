package ptlnet

import (
	"io"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
)

// benchPair opens two Nets (shared memory, or TCP over this host's address).
func benchPair(b *testing.B, tcp bool, ha, hb Handler) (*Net, *Net) {
	cfg := Config{PID: PIDAny, NoTCP: !tcp, ForceTCP: tcp, Secret: testSecret}
	x, err := Open(cfg, ha)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { x.Close() })
	y, err := Open(cfg, hb)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { y.Close() })
	return x, y
}

// BenchmarkRate: one-way message rate, hdr+payload as named, the receiver's
// progress goroutine running the Handler. msg/s is the figure.
func BenchmarkRate(b *testing.B) {
	for _, tcp := range []bool{false, true} {
		for _, sz := range [][2]int{{0, 8}, {64, 8}, {64, 4096}, {64, 1 << 20}} {
			name := map[bool]string{false: "shm", true: "tcp"}[tcp] + "/hdr" + strconv.Itoa(sz[0]) + "+" + strconv.Itoa(sz[1])
			b.Run(name, func(b *testing.B) {
				var got atomic.Int64
				x, y := benchPair(b, tcp, func(Peer, []byte, []byte) {}, func(Peer, []byte, []byte) { got.Add(1) })
				hdr, p := make([]byte, sz[0]), make([]byte, sz[1])
				if err := x.Send(y.ID(), hdr, p); err != nil {
					b.Fatal(err)
				}
				for got.Load() < 1 {
					runtime.Gosched()
				}
				b.SetBytes(int64(sz[0] + sz[1]))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := x.Send(y.ID(), hdr, p); err != nil {
						b.Fatal(err)
					}
				}
				for got.Load() < int64(b.N)+1 {
					runtime.Gosched()
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
			})
		}
	}
}

// BenchmarkRoundTrip: a 8-byte ping answered by a 8-byte pong from the
// peer's Handler.
func BenchmarkRoundTrip(b *testing.B) {
	for _, tcp := range []bool{false, true} {
		b.Run(map[bool]string{false: "shm", true: "tcp"}[tcp], func(b *testing.B) {
			pong := make(chan struct{}, 1)
			var y *Net
			x, y := benchPair(b, tcp, func(Peer, []byte, []byte) { pong <- struct{}{} }, func(src Peer, h, p []byte) {
				y.Send(src.ID, h, p)
			})
			hdr, p := make([]byte, 16), make([]byte, 8)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := x.Send(y.ID(), hdr, p); err != nil {
					b.Fatal(err)
				}
				<-pong
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/rt")
		})
	}
}

// rawPair is the reference: a connected pair of unix stream sockets, or of
// TCP sockets over loopback.
func rawPair(b *testing.B, tcp bool) (net.Conn, net.Conn) {
	var l net.Listener
	var err error
	if tcp {
		l, err = net.Listen("tcp4", "127.0.0.1:0")
	} else {
		l, err = net.Listen("unix", "@gexgo-ptl-bench-"+strconv.Itoa(int(nextBench.Add(1))))
	}
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		ch <- c
	}()
	c1, err := net.Dial(l.Addr().Network(), l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	c2 := <-ch
	b.Cleanup(func() { c1.Close(); c2.Close() })
	return c1, c2
}

var nextBench atomic.Int64

// BenchmarkRawRate is the same-run reference for BenchmarkRate: 8-byte
// messages, one write(2) each, through a raw socket.
func BenchmarkRawRate(b *testing.B) {
	for _, tcp := range []bool{false, true} {
		b.Run(map[bool]string{false: "unix", true: "tcp"}[tcp], func(b *testing.B) {
			c1, c2 := rawPair(b, tcp)
			done := make(chan struct{})
			go func() {
				buf := make([]byte, 64<<10)
				need := 8 * b.N
				for need > 0 {
					k, err := c2.Read(buf)
					if err != nil {
						break
					}
					need -= k
				}
				close(done)
			}()
			m := make([]byte, 8)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c1.Write(m)
			}
			<-done
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}

// BenchmarkRawRoundTrip is the same-run reference for BenchmarkRoundTrip.
func BenchmarkRawRoundTrip(b *testing.B) {
	for _, tcp := range []bool{false, true} {
		b.Run(map[bool]string{false: "unix", true: "tcp"}[tcp], func(b *testing.B) {
			c1, c2 := rawPair(b, tcp)
			go func() {
				m := make([]byte, 8)
				for {
					if _, err := io.ReadFull(c2, m); err != nil {
						return
					}
					c2.Write(m)
				}
			}()
			m := make([]byte, 8)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c1.Write(m)
				io.ReadFull(c1, m)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/rt")
		})
	}
}

// BenchmarkTwoProcesses: the rate and round trip to a helper process over
// shared memory (8-byte payloads, 64-byte headers), beside the raw
// references above.
func BenchmarkTwoProcesses(b *testing.B) {
	b.Run("rate", func(b *testing.B) {
		counted := make(chan int, 1)
		n, err := Open(Config{PID: PIDAny, NoTCP: true}, func(_ Peer, hdr, p []byte) {
			if string(hdr) == "count" {
				k, _ := strconv.Atoi(string(p))
				counted <- k
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		defer n.Close()
		h := startHelperB(b, "echo")
		hdr, p := make([]byte, 64), make([]byte, 8)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := n.Send(h.id, hdr, p); err != nil {
				b.Fatal(err)
			}
		}
		n.Send(h.id, []byte("end"), nil)
		k := <-counted
		b.StopTimer()
		if k != b.N+1 {
			b.Fatalf("helper counted %d, want %d", k, b.N+1)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
	})
	// Like a Portals put with a counting ack: 8-byte messages with a 64-byte
	// header, each acknowledged from the receiver's Handler, at most
	// `window` unacknowledged.
	for _, window := range []int{16, 128} {
		b.Run("acked/window"+strconv.Itoa(window), func(b *testing.B) {
			var acked atomic.Int64
			n, err := Open(Config{PID: PIDAny, NoTCP: true}, func(Peer, []byte, []byte) { acked.Add(1) })
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			h := startHelperB(b, "echo")
			hdr, p := []byte("ack?"), make([]byte, 8)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for int64(i)-acked.Load() >= int64(window) {
					if n.Poll() == 0 {
						runtime.Gosched()
					}
				}
				if err := n.Send(h.id, hdr, p); err != nil {
					b.Fatal(err)
				}
			}
			for acked.Load() < int64(b.N) {
				runtime.Gosched()
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
	// A polled round trip, as a Portals ping-pong makes it: the caller polls
	// inline for the echo, whose header is hl bytes with an 8-byte payload (a
	// frame of one 64-byte ring slot at hl 40, two at hl 80, the Portals
	// header's size).
	for _, hl := range []int{40, 80} {
		b.Run("pollrt/hdr"+strconv.Itoa(hl), func(b *testing.B) {
			var got atomic.Int64
			n, err := Open(Config{PID: PIDAny, NoTCP: true}, func(Peer, []byte, []byte) { got.Add(1) })
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close()
			h := startHelperB(b, "echo")
			hdr, p := make([]byte, hl), make([]byte, 8)
			copy(hdr, "PING")
			rt := func(i int) {
				if err := n.Send(h.id, hdr, p); err != nil {
					b.Fatal(err)
				}
				for got.Load() <= int64(i) {
					n.Poll()
				}
			}
			for i := range 1000 {
				rt(i)
			}
			got.Store(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rt(i)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/rt")
		})
	}
	b.Run("roundtrip", func(b *testing.B) {
		pong := make(chan struct{}, 1)
		n, err := Open(Config{PID: PIDAny, NoTCP: true}, func(Peer, []byte, []byte) { pong <- struct{}{} })
		if err != nil {
			b.Fatal(err)
		}
		defer n.Close()
		h := startHelperB(b, "echo")
		p := make([]byte, 8)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := n.Send(h.id, []byte("ping"), p); err != nil {
				b.Fatal(err)
			}
			<-pong
		}
		b.StopTimer()
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/rt")
	})
}
