package shm

import (
	"strings"
	"testing"
)

// TestDuoAt checks the view's bounds (the line must lie inside the slice and
// be 64-byte aligned) and its halves: a commit shows in its half's word
// only, data goes to bytes 8-31 of its half, and a clear empties the word.
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
	if d.Word(DuoAsk) != 0 || d.Word(DuoAnswer) != 0 {
		t.Fatal("a new line's halves are not empty")
	}
	copy(d.Data(DuoAnswer), "answer")
	d.Commit(DuoAnswer, 42)
	if d.Word(DuoAnswer) != 42 || d.Word(DuoAsk) != 0 || string(b[DuoBytes+DuoHalf+8:DuoBytes+DuoHalf+14]) != "answer" {
		t.Fatalf("after a commit of the answerer half: words %d/%d, line %q", d.Word(DuoAsk), d.Word(DuoAnswer), b[DuoBytes:2*DuoBytes])
	}
	if len(d.Data(DuoAsk)) != DuoData || cap(d.Data(DuoAsk)) != DuoData || len(d.Line()) != DuoBytes {
		t.Fatal("Data or Line reaches outside its bytes")
	}
	d.Clear(DuoAnswer)
	if d.Word(DuoAnswer) != 0 {
		t.Fatal("Clear left the word set")
	}
}
