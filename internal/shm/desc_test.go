package shm

import (
	"errors"
	"math"
	"testing"
)

var validDescs = []Desc{
	{Kind: DescMemfd, PID: 1, FD: 0, Size: 4096},
	{Kind: DescMemfd, PID: 123456, FD: 77, Size: 1 << 40},
	{Kind: DescMemfd, PID: math.MaxInt32, FD: math.MaxInt32, Size: math.MaxInt64},
	{Kind: DescHeap, Size: 1, ID: 0},
	{Kind: DescHeap, Size: 65536, ID: math.MaxUint64},
}

func TestDescRoundTrip(t *testing.T) {
	for _, d := range validDescs {
		b, err := d.MarshalBinary()
		if err != nil {
			t.Fatalf("%v: Marshal: %v", d, err)
		}
		if len(b) != DescSize {
			t.Fatalf("%v: %d bytes", d, len(b))
		}
		var e Desc
		if err := e.UnmarshalBinary(b); err != nil {
			t.Fatalf("%v: Unmarshal: %v", d, err)
		}
		if e != d {
			t.Errorf("round trip %v -> %v", d, e)
		}
		a, err := d.AppendBinary([]byte{9})
		if err != nil || len(a) != 1+DescSize || string(a[1:]) != string(b) {
			t.Errorf("%v: AppendBinary differs from MarshalBinary", d)
		}
	}
}

func TestDescEncoding(t *testing.T) {
	b, _ := Desc{Kind: DescMemfd, PID: 0x01020304, FD: 5, Size: 0x1000, ID: 0}.MarshalBinary()
	want := []byte{1, 0, 0, 0, 4, 3, 2, 1, 5, 0, 0, 0, 0, 0, 0, 0,
		0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if string(b) != string(want) {
		t.Errorf("encoding\n% x\nwant\n% x", b, want)
	}
}

func TestDescStrict(t *testing.T) {
	good, _ := validDescs[1].MarshalBinary()
	mut := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for _, c := range []struct {
		name  string
		b     []byte
		field string
	}{
		{"empty", nil, "length"},
		{"short", good[:31], "length"},
		{"long", append(append([]byte(nil), good...), 0), "length"},
		{"kind 0", mut(func(b []byte) { b[0] = 0 }), "Kind"},
		{"kind 3", mut(func(b []byte) { b[0] = 3 }), "Kind"},
		{"reserved 1", mut(func(b []byte) { b[1] = 1 }), "reserved"},
		{"reserved 15", mut(func(b []byte) { b[15] = 1 }), "reserved"},
		{"zero size", mut(func(b []byte) { clear(b[16:24]) }), "Size"},
		{"huge size", mut(func(b []byte) { b[23] = 0x80 }), "Size"},
		{"memfd pid 0", mut(func(b []byte) { clear(b[4:8]) }), "PID"},
		{"memfd fd -1", mut(func(b []byte) { b[8], b[9], b[10], b[11] = 0xff, 0xff, 0xff, 0xff }), "FD"},
		{"memfd id", mut(func(b []byte) { b[24] = 1 }), "ID"},
		{"heap pid", mut(func(b []byte) { b[0] = DescHeap }), "PID/FD"},
	} {
		d := Desc{Kind: DescHeap, Size: 3, ID: 4}
		before := d
		err := d.UnmarshalBinary(c.b)
		var fe *FormatError
		if !errors.As(err, &fe) || !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err = %v, want a FormatError", c.name, err)
			continue
		}
		if fe.Field != c.field {
			t.Errorf("%s: field %q, want %q (%v)", c.name, fe.Field, c.field, err)
		}
		if d != before {
			t.Errorf("%s: Desc modified on error", c.name)
		}
	}
	if _, err := (Desc{}).MarshalBinary(); err == nil {
		t.Error("Marshal of the zero Desc succeeded")
	}
}
