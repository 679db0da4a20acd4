//go:build !amd64 || race

package shm

// PrefetchPut is a hint with no effect here (see prefetch_amd64.go).
func (p *Pool) PrefetchPut(idx int) {}

// PrefetchHot is a hint with no effect here (see prefetch_amd64.go).
func (p *Pool) PrefetchHot() {}
