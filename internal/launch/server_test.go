package launch_test

import (
	"bufio"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gexgo/gexgo/internal/boot/bootwire"
	"github.com/gexgo/gexgo/internal/launch"
)

// rawRank is a hand-driven bootstrap connection.
type rawRank struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, srv *launch.Server) *rawRank {
	t.Helper()
	c, err := net.Dial("unix", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawRank{t: t, c: c, br: bufio.NewReader(c)}
}

func (r *rawRank) send(m bootwire.Msg) {
	r.t.Helper()
	if err := bootwire.WriteMsg(r.c, m); err != nil {
		r.t.Fatal(err)
	}
}

// recv returns the next message, or nil at the end of the connection.
func (r *rawRank) recv() bootwire.Msg {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	m, err := bootwire.ReadMsg(r.br)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		r.t.Fatalf("reading from the server: %v", err)
	}
	return m
}

// admit connects ranks 0..n-1 of a job of size and checks each is welcomed.
func admit(t *testing.T, srv *launch.Server, n, size int) []*rawRank {
	t.Helper()
	rs := make([]*rawRank, n)
	for i := range rs {
		rs[i] = dialRaw(t, srv)
		rs[i].send(hello(i, size))
		if m, ok := rs[i].recv().(*bootwire.Welcome); !ok {
			t.Fatalf("rank %d: %#v, want WELCOME", i, m)
		}
	}
	return rs
}

func hello(rank, size int) *bootwire.Hello {
	return &bootwire.Hello{Rank: uint32(rank), Size: uint32(size), PID: uint32(os.Getpid())}
}

func listen(t *testing.T, size int) *launch.Server {
	t.Helper()
	srv, err := launch.Listen(launch.NewJobID(), size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func nextEvent(t *testing.T, srv *launch.Server) launch.Event {
	t.Helper()
	select {
	case ev := <-srv.Events():
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	panic("unreachable")
}

func TestServerRejectsBadHello(t *testing.T) {
	srv := listen(t, 4)
	cases := []struct {
		name  string
		first bootwire.Msg
		want  string
	}{
		{"rank out of range", hello(9, 4), "rank 9 is out of range [0, 4)"},
		{"size mismatch", hello(0, 5), "HELLO says the job has 5 ranks, the launcher started 4"},
		{"not a hello", &bootwire.Gather{Seq: 1}, "first frame is GATHER, want HELLO"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := dialRaw(t, srv)
			r.send(c.first)
			if m, ok := r.recv().(*bootwire.Reject); !ok || m.Msg != c.want {
				t.Errorf("answer %#v, want REJECT %q", m, c.want)
			}
			if m := r.recv(); m != nil {
				t.Errorf("connection still open after REJECT: %#v", m)
			}
			if ev := nextEvent(t, srv); ev.Kind != launch.EventDropped || !strings.HasSuffix(ev.Msg, ": "+c.want) {
				t.Errorf("event %+v", ev)
			}
		})
	}
	t.Run("garbage", func(t *testing.T) {
		r := dialRaw(t, srv)
		r.c.Write([]byte{0, 0, 0, 0})
		if m := r.recv(); m != nil {
			t.Errorf("answer %#v to garbage, want the connection closed", m)
		}
		if ev := nextEvent(t, srv); ev.Kind != launch.EventDropped || !strings.Contains(ev.Msg, "no HELLO: bootwire: malformed frame: length 0") {
			t.Errorf("event %+v", ev)
		}
	})
}

func TestServerProtocolErrors(t *testing.T) {
	srv := listen(t, 2)
	cases := []struct {
		name string
		send bootwire.Msg
		want string
	}{
		{"gather out of order", &bootwire.Gather{Seq: 5}, "GATHER seq 5 out of order (the launcher is collecting all-gather 1)"},
		{"launcher frame", &bootwire.Welcome{}, "unexpected WELCOME frame"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := dialRaw(t, srv)
			r.send(hello(0, 2))
			if _, ok := r.recv().(*bootwire.Welcome); !ok {
				t.Fatal("no WELCOME")
			}
			r.send(c.send)
			if ev := nextEvent(t, srv); ev.Kind != launch.EventDropped || ev.Rank != 0 || !strings.HasSuffix(ev.Msg, c.want) {
				t.Errorf("event %+v, want dropped: %q", ev, c.want)
			}
			if m := r.recv(); m != nil {
				t.Errorf("connection still open: %#v", m)
			}
		})
	}
}

func TestServerGather(t *testing.T) {
	srv := listen(t, 3)
	rs := admit(t, srv, 3, 3)
	for seq := uint32(1); seq <= 2; seq++ {
		for i, r := range rs {
			r.send(&bootwire.Gather{Seq: seq, Data: []byte(strings.Repeat("x", i*int(seq)))})
		}
		want := &bootwire.Gathered{Seq: seq, Parts: [][]byte{{}, []byte(strings.Repeat("x", int(seq))), []byte(strings.Repeat("x", 2*int(seq)))}}
		for i, r := range rs {
			if got := r.recv(); !reflect.DeepEqual(got, want) {
				t.Errorf("seq %d, rank %d: got %#v, want %#v", seq, i, got, want)
			}
		}
	}
}

func TestServerFirstExitWins(t *testing.T) {
	srv := listen(t, 2)
	rs := make([]*rawRank, 2)
	for i := range rs {
		rs[i] = dialRaw(t, srv)
		rs[i].send(hello(i, 2))
		rs[i].recv()
	}
	rs[0].send(&bootwire.Exit{Code: 3})
	if ev := nextEvent(t, srv); ev.Kind != launch.EventExit || ev.Rank != 0 || ev.Code != 3 {
		t.Errorf("event %+v", ev)
	}
	for i, r := range rs {
		if m, ok := r.recv().(*bootwire.ExitNow); !ok || m.Code != 3 {
			t.Errorf("rank %d: %#v, want EXITNOW 3", i, m)
		}
	}
	rs[1].send(&bootwire.Exit{Code: 4})
	if m, ok := rs[1].recv().(*bootwire.ExitNow); !ok || m.Code != 3 {
		t.Errorf("second EXIT answered %#v, want EXITNOW 3", m)
	}
	select {
	case ev := <-srv.Events():
		t.Errorf("second EXIT reported: %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestListenErrors(t *testing.T) {
	if _, err := launch.Listen("x", 0); err == nil || !strings.Contains(err.Error(), "size 0 is out of range [1, 4096]") {
		t.Errorf("Listen of size 0: %v", err)
	}
	id := launch.NewJobID()
	srv, err := launch.Listen(id, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if srv.Addr() != "@gexgo-"+id {
		t.Errorf("Addr() = %q", srv.Addr())
	}
	if _, err := launch.Listen(id, 1); err == nil {
		t.Errorf("a second Listen on job %s succeeded", id)
	}
	if err := srv.Close(); err != nil {
		t.Error(err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
