package bootwire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// samples is one message of every type, used by the round-trip tests and as
// the fuzz seed corpus.
func samples() []Msg {
	return []Msg{
		&Hello{Rank: 3, Size: 4, PID: 12345},
		&Gather{Seq: 1, Data: []byte("contribution")},
		&Gather{Seq: 7, Data: []byte{}},
		&Exit{Code: -2},
		&Exit{Code: 5},
		&Abort{Msg: "disk on fire"},
		&Welcome{},
		&Gathered{Seq: 2, Parts: [][]byte{{}, []byte("a"), bytes.Repeat([]byte("xy"), 40), {0}}},
		&Gathered{Seq: 9, Parts: [][]byte{}},
		&ExitNow{Code: 3},
		&Reject{Msg: "rank 9 is out of range [0, 4)"},
		&GatherFail{Seq: 4, Msg: "too large"},
		&Finalize{},
		&Finalized{},
		&Progress{Count: 1 << 40, Msg: "Event.Wait: Put to rank 3"},
		&PeerLeft{Rank: 2, Code: 0, DelayMS: 500, Msg: "rank 2 left"},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range samples() {
		b, err := Append([]byte("prefix"), m)
		if err != nil {
			t.Fatalf("Append(%v): %v", m.Type(), err)
		}
		if !bytes.HasPrefix(b, []byte("prefix")) {
			t.Fatalf("Append(%v) lost dst", m.Type())
		}
		b = b[len("prefix"):]
		if got := len(b); got != HeaderLen+FrameLen(m) {
			t.Errorf("%v: encoded %d bytes, FrameLen says %d+%d", m.Type(), got, HeaderLen, FrameLen(m))
		}
		got, n, err := Decode(append(b, "trailing"...))
		if err != nil {
			t.Fatalf("Decode(%v): %v", m.Type(), err)
		}
		if n != len(b) {
			t.Errorf("Decode(%v) consumed %d bytes, want %d", m.Type(), n, len(b))
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("Decode(%v) = %#v, want %#v", m.Type(), got, m)
		}
		got, err = ReadMsg(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("ReadMsg(%v): %v", m.Type(), err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("ReadMsg(%v) = %#v, want %#v", m.Type(), got, m)
		}
	}
}

func TestWriteMsgStream(t *testing.T) {
	var buf bytes.Buffer
	for _, m := range samples() {
		if err := WriteMsg(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range samples() {
		got, err := ReadMsg(&buf)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("message %d = %#v, want %#v", i, got, want)
		}
	}
	if _, err := ReadMsg(&buf); err != io.EOF {
		t.Errorf("ReadMsg at end of stream: %v, want io.EOF", err)
	}
}

func TestTypeString(t *testing.T) {
	want := map[Type]string{
		TypeHello: "HELLO", TypeGather: "GATHER", TypeExit: "EXIT", TypeAbort: "ABORT",
		TypeWelcome: "WELCOME", TypeGathered: "GATHERED", TypeExitNow: "EXITNOW",
		TypeReject: "REJECT", TypeGatherFail: "GATHERFAIL", 0x42: "TYPE(0x42)",
		TypeFinalize: "FINALIZE", TypeProgress: "PROGRESS", TypeFinalized: "FINALIZED", TypePeerLeft: "PEERLEFT",
	}
	for ty, s := range want {
		if ty.String() != s {
			t.Errorf("Type(%#x).String() = %q, want %q", uint8(ty), ty.String(), s)
		}
	}
}

func frame(typ Type, body ...byte) []byte {
	b := le.AppendUint32(nil, uint32(1+len(body)))
	return append(append(b, byte(typ)), body...)
}

func TestDecodeStrict(t *testing.T) {
	u32 := func(v uint32) []byte { return le.AppendUint32(nil, v) }
	cat := func(ps ...[]byte) []byte { return bytes.Join(ps, nil) }
	cases := []struct {
		name string
		in   []byte
		want string // substring of the error
	}{
		{"zero length", []byte{0, 0, 0, 0}, "length 0"},
		{"oversize", u32(MaxFrame + 1), "exceeds the maximum"},
		{"unknown type", frame(0x42), "unknown frame type TYPE(0x42)"},
		{"type zero", frame(0), "unknown frame type"},
		{"hello short", frame(TypeHello, make([]byte, 11)...), "HELLO: body is 11 bytes, want 12"},
		{"hello long", frame(TypeHello, make([]byte, 13)...), "HELLO: body is 13 bytes, want 12"},
		{"gather short", frame(TypeGather, 1, 2, 3), "GATHER: body is 3 bytes, want at least 4"},
		{"exit long", frame(TypeExit, 1, 2, 3, 4, 5), "EXIT: body is 5 bytes, want 4"},
		{"welcome body", frame(TypeWelcome, 1), "WELCOME: body is 1 bytes, want 0"},
		{"exitnow short", frame(TypeExitNow), "EXITNOW: body is 0 bytes, want 4"},
		{"gatherfail short", frame(TypeGatherFail, 1), "GATHERFAIL"},
		{"finalize long", frame(TypeFinalize, 1), "FINALIZE: body is 1 bytes, want 0"},
		{"progress short", frame(TypeProgress, 1, 2, 3), "PROGRESS"},
		{"peerleft short", frame(TypePeerLeft, 1, 2, 3, 4), "PEERLEFT"},
		{"gathered short", frame(TypeGathered, make([]byte, 7)...), "GATHERED: body is 7 bytes, want at least 8"},
		{"gathered too many parts", frame(TypeGathered, cat(u32(1), u32(1<<30))...), "parts cannot fit"},
		{"gathered part overruns", frame(TypeGathered, cat(u32(1), u32(1), u32(5), []byte("abc"))...), "length 5 exceeds the 3 bytes left"},
		{"gathered trailing", frame(TypeGathered, cat(u32(1), u32(1), u32(1), []byte("ab"))...), "1 bytes after the last of 1 parts"},
		{"gathered truncated length", frame(TypeGathered, cat(u32(1), u32(2), u32(2), []byte("ab"), []byte{0, 0})...), "length field truncated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _, err := Decode(c.in)
			if err == nil {
				t.Fatalf("Decode accepted %x as %#v", c.in, m)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %q does not wrap ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if m, err := ReadMsg(bytes.NewReader(c.in)); err == nil {
				t.Errorf("ReadMsg accepted %x as %#v", c.in, m)
			}
		})
	}
}

func TestDecodeShort(t *testing.T) {
	full := frame(TypeHello, make([]byte, 12)...)
	for n := 0; n < len(full); n++ {
		_, _, err := Decode(full[:n])
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("Decode of %d of %d bytes: %v, want io.ErrUnexpectedEOF", n, len(full), err)
		}
		_, err = ReadMsg(bytes.NewReader(full[:n]))
		switch {
		case n == 0 && err != io.EOF:
			t.Errorf("ReadMsg of 0 bytes: %v, want io.EOF", err)
		case n > 0 && !errors.Is(err, io.ErrUnexpectedEOF):
			t.Errorf("ReadMsg of %d of %d bytes: %v, want io.ErrUnexpectedEOF", n, len(full), err)
		}
	}
}

func TestAppendOversize(t *testing.T) {
	m := &Gather{Seq: 1, Data: make([]byte, MaxFrame-5+1)}
	dst := []byte("x")
	got, err := Append(dst, m)
	if err == nil || !strings.Contains(err.Error(), "exceeds the maximum of 67108864 bytes") {
		t.Fatalf("Append of an oversize GATHER: %v", err)
	}
	if len(got) != 1 {
		t.Errorf("Append changed dst on error")
	}
	m.Data = m.Data[:len(m.Data)-1] // exactly MaxFrame
	if _, err := Append(nil, m); err != nil {
		t.Errorf("Append of a frame of exactly MaxFrame bytes: %v", err)
	}
}

func TestDecodeCopies(t *testing.T) {
	b, _ := Append(nil, &Gathered{Seq: 1, Parts: [][]byte{[]byte("abc")}})
	m, _, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if got := string(m.(*Gathered).Parts[0]); got != "abc" {
		t.Errorf("Decode result aliases its input: part = %q after clearing the input", got)
	}
}

// FuzzDecodeFrame checks that Decode never panics, that whatever it accepts
// re-encodes to exactly the bytes it consumed, and that ReadMsg agrees.
func FuzzDecodeFrame(f *testing.F) {
	for _, m := range samples() {
		b, err := Append(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x82})
	f.Fuzz(func(t *testing.T, in []byte) {
		m, n, err := Decode(in)
		m2, err2 := ReadMsg(bytes.NewReader(in))
		if (err == nil) != (err2 == nil) {
			t.Fatalf("Decode error %v, ReadMsg error %v", err, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("Decode error %v wraps neither ErrMalformed nor io.ErrUnexpectedEOF", err)
			}
			return
		}
		if n < HeaderLen+1 || n > len(in) {
			t.Fatalf("Decode consumed %d of %d bytes", n, len(in))
		}
		out, err := Append(nil, m)
		if err != nil {
			t.Fatalf("Append of a decoded %v: %v", m.Type(), err)
		}
		if !bytes.Equal(out, in[:n]) {
			t.Fatalf("re-encoding %v gave %x, input was %x", m.Type(), out, in[:n])
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("Decode = %#v, ReadMsg = %#v", m, m2)
		}
	})
}
