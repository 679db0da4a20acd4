package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gexgo/gexgo/gex"
)

// The rawtcp benchmark is the floor under the tcp conduit, measured in the
// same job (same hosts, same addresses, same load) with plain sockets and
// no gexgo in the path: rank 1 listens on its GEX_TCP_ADDR, tells rank 0 the
// address through an AM, and the two then run
//
//   - an 8-byte ping-pong on non-blocking sockets that both sides busy-poll
//     (read(2) until the bytes are there): the round trip the conduit's AM,
//     put, get and FADD round trips are compared with;
//   - a one-way stream in writes of 64 KiB and 1 MiB (1 MiB reads), -samples
//     samples of 256 MiB each, timed until rank 1 acknowledges the last
//     byte; once with both sides busy-polling (retrying EAGAIN at once) and
//     once sleeping in poll(2) on EAGAIN (on a machine with as many cores as
//     ranks the first is usually faster, on a loaded one the second); each
//     with the system's congestion control and with CUBIC, the tcp
//     conduit's default (GEX_TCP_CONGESTION; the system's may be BBR, which
//     paces); and, as a diagnostic, with 1 MiB writes walking through a
//     4 MiB buffer (the memory a 4 MiB flood moves).

// hRawAddr carries rank 1's listening address to rank 0.
const hRawAddr gex.AMIndex = gex.AMIndexBase + 60

// rawStreamBytes is the size of one stream sample.
const rawStreamBytes = 256 << 20

// rawWriteSizes are the stream's write sizes.
var rawWriteSizes = []int{64 << 10, 1 << 20}

// rawHandlers receive rank 1's address.
func rawHandlers(addr *atomic.Pointer[string]) []gex.AMEntry {
	return []gex.AMEntry{{Index: hRawAddr, Flags: gex.FlagAMMedium | gex.FlagAMRequest, Name: "gexbench-rawtcp-addr",
		Fn: func(_ *gex.Token, p []byte, _ []gex.AMArg) { s := string(p); addr.Store(&s) }}}
}

// rawTCP runs the raw-socket floor between ranks 0 and 1 (others return at
// once); rank 0 prints.
func rawTCP(cfg *config, c *gex.Client, tm *gex.TM, addr *atomic.Pointer[string], stdout io.Writer) error {
	me := tm.QueryRank()
	if me > 1 {
		return nil
	}
	fd, err := rawConnect(c, tm, addr)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	iters := cfg.iters
	if iters == 0 {
		iters = 100000
	}
	lat, err := timeBatches(iters, cfg.batches, func(n int) error { return rawPingPong(fd, me, n) })
	if err != nil {
		return fmt.Errorf("raw TCP ping-pong: %w", err)
	}
	res := &results{}
	fmt.Fprintf(&res.table, "Raw TCP between ranks 0 and 1 (non-blocking sockets, busy-polled; no gexgo in the path)\n")
	fmt.Fprintf(&res.table, "%-28s %12s %12s %12s\n", "", "avg", "median", "min")
	fmt.Fprintf(&res.table, "%-28s %12s %12s %12s\n", "8 B ping-pong round trip", durName(lat.avg), durName(lat.median), durName(lat.min))
	res.latRows("raw-tcp-rtt", "raw", 8, lat)
	fmt.Fprintf(&res.table, "%-28s %12s %12s\n", "stream (one way)", "MiB/s median", "best")
	buf := make([]byte, 1<<20)
	system, err := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	if err != nil {
		return fmt.Errorf("raw TCP: reading TCP_CONGESTION: %w", err)
	}
	for _, cc := range rawCongestions(system) {
		if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc); err != nil {
			return fmt.Errorf("raw TCP: setting the congestion control %q: %w", cc, err)
		}
		if err := rawStreams(cfg, fd, me, buf, cc, cc != system, res); err != nil {
			return err
		}
	}
	if err := rawFootprint(cfg, fd, me, res); err != nil {
		return err
	}
	if me == 0 {
		res.write(stdout, cfg.csv)
	}
	return nil
}

// rawCongestions are the congestion controls the stream is measured with:
// the system's, then CUBIC (the tcp conduit's default) if that differs.
func rawCongestions(system string) []string {
	if system == "cubic" {
		return []string{system}
	}
	return []string{system, "cubic"}
}

// rawStreams runs the stream variants with congestion control cc (named
// in the bench column if suffix).
func rawStreams(cfg *config, fd int, me gex.Rank, buf []byte, cc string, suffix bool, res *results) error {
	sfx := ""
	if suffix {
		sfx = "-" + cc
	}
	for _, mode := range []struct {
		name string
		wait bool
	}{{"busy", false}, {"poll", true}} {
		for _, ws := range rawWriteSizes {
			var rates []float64
			for s := 0; s < cfg.samples; s++ {
				start := time.Now()
				if err := rawStream(fd, me, buf, ws, mode.wait, false); err != nil {
					return err
				}
				rates = append(rates, float64(rawStreamBytes)/(1<<20)/time.Since(start).Seconds())
			}
			sort.Float64s(rates)
			med, best := median(rates), rates[len(rates)-1]
			fmt.Fprintf(&res.table, "%-28s %12s %12s\n", "  "+mode.name+", writes of "+sizeName(ws)+", "+cc, groupDigits(med), groupDigits(best))
			res.add("raw-tcp-stream-"+mode.name+sfx, "raw", ws, "median", med, "MiB/s")
			res.add("raw-tcp-stream-"+mode.name+sfx, "raw", ws, "best", best, "MiB/s")
		}
	}
	return nil
}

// rawFootprint runs the stream once more (with the congestion control set
// last, CUBIC) in 1 MiB writes walking through a 4 MiB buffer on both sides:
// the memory a 4 MiB put or get flood moves every window, where the streams
// above reuse one 1 MiB buffer (which stays in a 2 MiB L2 cache). Its rows
// are raw-tcp-4mib-*, not raw-tcp-stream-*: a diagnostic beside the floor,
// not a variant of it.
func rawFootprint(cfg *config, fd int, me gex.Rank, res *results) error {
	buf := make([]byte, 4<<20)
	const ws = 1 << 20
	for _, mode := range []struct {
		name string
		wait bool
	}{{"busy", false}, {"poll", true}} {
		var rates []float64
		for s := 0; s < cfg.samples; s++ {
			start := time.Now()
			if err := rawStream(fd, me, buf, ws, mode.wait, true); err != nil {
				return err
			}
			rates = append(rates, float64(rawStreamBytes)/(1<<20)/time.Since(start).Seconds())
		}
		sort.Float64s(rates)
		med, best := median(rates), rates[len(rates)-1]
		fmt.Fprintf(&res.table, "%-28s %12s %12s\n", "  "+mode.name+", 1 MiB writes, 4 MiB buffer", groupDigits(med), groupDigits(best))
		res.add("raw-tcp-4mib-"+mode.name, "raw", ws, "median", med, "MiB/s")
		res.add("raw-tcp-4mib-"+mode.name, "raw", ws, "best", best, "MiB/s")
	}
	return nil
}

// rawConnect connects rank 0 to rank 1 and returns the socket, non-blocking
// with TCP_NODELAY.
func rawConnect(c *gex.Client, tm *gex.TM, addr *atomic.Pointer[string]) (int, error) {
	var conn net.Conn
	if tm.QueryRank() == 1 {
		host := os.Getenv("GEX_TCP_ADDR")
		if host == "" {
			host = "127.0.0.1"
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return -1, err
		}
		defer ln.Close()
		a := ln.Addr().String()
		if err := tm.RequestMedium(0, hRawAddr, []byte(a), nil, 0); err != nil {
			return -1, err
		}
		conn, err = ln.Accept()
		if err != nil {
			return -1, err
		}
	} else {
		if err := c.BlockUntil(func() bool { return addr.Load() != nil }); err != nil {
			return -1, err
		}
		var err error
		conn, err = net.Dial("tcp", *addr.Load())
		if err != nil {
			return -1, err
		}
	}
	defer conn.Close()
	rc, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if cerr := rc.Control(func(s uintptr) { fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return -1, cerr
	}
	if err != nil {
		return -1, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return -1, err
	}
	return fd, unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
}

// rawStream runs one stream sample: rank 0 writes rawStreamBytes in writes of
// ws bytes, rank 1 reads them and answers one byte. wait: sleep in poll(2) on
// EAGAIN instead of retrying at once. cycle: the writes and reads walk
// through all of buf (ws divides len(buf)) instead of reusing its start.
func rawStream(fd int, me gex.Rank, buf []byte, ws int, wait, cycle bool) error {
	pfd := []unix.PollFd{{Fd: int32(fd)}}
	block := func(ev int16) {
		if wait {
			pfd[0].Events = ev
			unix.Poll(pfd, -1)
		}
	}
	off := 0
	advance := func(n int) {
		if cycle {
			off = (off + n) % len(buf)
		}
	}
	if me == 0 {
		for sent := 0; sent < rawStreamBytes; {
			b := buf[off : off+ws]
			advance(ws)
			for len(b) > 0 {
				n, err := unix.Write(fd, b)
				if err == unix.EAGAIN || err == unix.EINTR {
					block(unix.POLLOUT)
					continue
				}
				if err != nil {
					return err
				}
				b = b[n:]
				sent += n
			}
		}
		var ack [1]byte
		return rawRead(fd, ack[:])
	}
	for got := 0; got < rawStreamBytes; {
		n, err := unix.Read(fd, buf[off:off+min(len(buf)-off, rawStreamBytes-got)])
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			block(unix.POLLIN)
			continue
		case err != nil:
			return err
		case n == 0:
			return errRawClosed
		}
		got += n
		advance(n)
	}
	return rawWrite(fd, []byte{1})
}

var errRawClosed = errors.New("raw TCP: the peer closed the connection")

// rawWrite writes all of b, busy-polling.
func rawWrite(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// rawRead reads exactly len(b) bytes, busy-polling.
func rawRead(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := rawReadSome(fd, b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// rawReadSome reads at least one byte into b, busy-polling.
func rawReadSome(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, errRawClosed
		}
		return n, nil
	}
}

// rawPingPong runs n 8-byte round trips on the raw socket fd: rank 0 writes
// and reads the answer, rank 1 answers.
func rawPingPong(fd int, me gex.Rank, n int) error {
	var msg [8]byte
	for i := 0; i < n; i++ {
		if me == 0 {
			if err := rawWrite(fd, msg[:]); err != nil {
				return err
			}
			if err := rawRead(fd, msg[:]); err != nil {
				return err
			}
		} else {
			if err := rawRead(fd, msg[:]); err != nil {
				return err
			}
			if err := rawWrite(fd, msg[:]); err != nil {
				return err
			}
		}
	}
	return nil
}
