// Package gctx identifies the calling goroutine cheaply, so the library can tell
// whether a call comes from inside an AM handler or while holding a handler-safe
// lock (the GASNet-EX "Calls from restricted context" rules), which in C are
// per-thread properties.
//
// ID returns an opaque non-zero value that is stable for the life of the calling
// goroutine and distinct from that of every other live goroutine. On amd64 and
// arm64 it is the runtime's goroutine pointer (the g register), read in a few
// instructions; elsewhere it is parsed from runtime.Stack, which is slow but only
// used on those platforms.
package gctx
