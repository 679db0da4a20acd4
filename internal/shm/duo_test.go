package shm

import (
	"strings"
	"testing"
)

// TestDuoAt checks the view's bounds (the line must lie inside the slice and
// be 64-byte aligned) and its word: a commit shows in the word, data goes
// to bytes 8-63, and a clear empties the word.
func TestDuoAt(t *testing.T) {
	reg, err := NewHeap().Create("duo", 4*DuoBytes)
	if err != nil {
		t.Fatal(err)
	}
	b := reg.Bytes()
	for _, off := range []int{-64, len(b) - DuoBytes + 1, len(b), 8} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "DuoAt: offset") {
					t.Errorf("DuoAt(%d) of a %d-byte region: recovered %v, want a panic naming the offset", off, len(b), r)
				}
			}()
			DuoAt(b, off)
		}()
	}
	d := DuoAt(b, DuoBytes)
	if d.Word() != 0 {
		t.Fatal("a new line is not empty")
	}
	copy(d.Line()[8:], "message")
	d.Commit(42)
	if d.Word() != 42 || string(b[DuoBytes+8:DuoBytes+15]) != "message" || b[0] != 0 || b[2*DuoBytes] != 0 {
		t.Fatalf("after a commit: word %d, line %q", d.Word(), b[DuoBytes:2*DuoBytes])
	}
	if len(d.Line()) != DuoBytes || cap(d.Line()) != DuoBytes {
		t.Fatal("Line reaches outside its bytes")
	}
	d.Clear()
	if d.Word() != 0 {
		t.Fatal("Clear left the word set")
	}
}
