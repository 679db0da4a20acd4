// Package bootwire is the wire format of the bootstrap protocol spoken between
// a rank (package boot) and the launcher (package launch).
//
// # Transport
//
// The launcher listens on an abstract Unix stream socket named
// "@gexgo-<jobid>" (Linux; no file in the file system). Its address is given to
// every rank in GEX_BOOT. The launcher accepts connections only from processes
// of its own user (SO_PEERCRED).
//
// # Frames
//
// Every message is one frame:
//
//	u32 length (little endian; counts the type byte and the body, 1..MaxFrame)
//	u8  type
//	    body (length-1 bytes, layout by type, integers little endian)
//
// Rank to launcher:
//
//	HELLO    0x01  rank u32, size u32, pid u32            first frame of a connection
//	GATHER   0x02  seq u32, data                           one rank's all-gather contribution
//	EXIT     0x03  code i32                                end the job with code
//	ABORT    0x04  msg                                     fatal error in this rank
//	FINALIZE 0x05  (empty)                                 this rank called Close: it may end now
//	PROGRESS 0x06  count u64, msg                          communication progress (--hang-timeout)
//
// Launcher to rank:
//
//	WELCOME    0x81  (empty)                               HELLO accepted
//	GATHERED   0x82  seq u32, n u32, n x (len u32, bytes)  result of all-gather seq, by rank
//	EXITNOW    0x83  code i32                              exit now with code (also acks EXIT and ABORT)
//	REJECT     0x84  msg                                   HELLO refused; the launcher closes the connection
//	GATHERFAIL 0x85  seq u32, msg                          all-gather seq cannot complete (result too large)
//	FINALIZED  0x86  (empty)                               FINALIZE recorded
//	PEERLEFT   0x87  rank u32, code i32, delay_ms u32, msg rank left the job early; end with code after delay_ms
//
// The decoder is strict: an unknown type, a body shorter or longer than its
// layout, a zero length or one above MaxFrame is an error wrapping
// ErrMalformed. Nothing is allocated on the strength of a length field before
// that length has been checked against the bytes present (Decode) or against
// MaxFrame (ReadMsg).
//
// # Conversation
//
// A rank connects, sends HELLO{rank, size, pid} and waits for WELCOME. The
// launcher checks that rank is in [0, size), that size is the job's size and
// that no live connection already holds rank; otherwise it answers REJECT with
// the reason and closes. If the job is already ending (a rank sent EXIT), it
// answers EXITNOW instead of WELCOME.
//
// Collectives: the i-th collective of every rank (i = 1, 2, ...) is
// GATHER{seq: i, data}. When all size ranks have sent GATHER i, the launcher
// sends GATHERED{i, contributions by rank} to every connected rank, or
// GATHERFAIL{i, reason} if the result would exceed MaxFrame. A barrier is a
// GATHER with empty data. A GATHER with an unexpected seq is a protocol error:
// the launcher drops the connection (and the rank then exits, see below).
//
// Exit: EXIT{code} ends the job. The first EXIT wins: the launcher records the
// code, then sends EXITNOW{code} to every connected rank (and to any rank that
// connects later). A rank receiving EXITNOW runs its exit hooks and exits with
// code. ABORT{msg}: the launcher prints "gexrun: rank R aborted: msg",
// acknowledges with EXITNOW{1} and terminates the other ranks. Because the
// launcher acknowledges only after it has recorded EXIT or ABORT, the rank's
// exit status that follows is never mistaken for a crash.
//
// Finalize: Close sends FINALIZE and waits (bounded) for FINALIZED before it
// closes the connection, so the launcher has recorded that the rank is done
// before it can see the process end. A rank whose process ends without
// FINALIZE (and without EXIT or ABORT) while other ranks are still in the job
// has left it early: the launcher sends PEERLEFT{rank, code, delay, words} to
// every connected rank, which fails its pending waits with an error naming
// that rank and exits with code after delay (the launcher kills what is left
// after its grace time). PROGRESS frames are sent only when the launcher asked
// for them (GEX_PROGRESS_MS, see package launch).
//
// When a rank's connection ends without EXITNOW (the launcher died), the rank
// prints "gexgo: rank R: launcher connection lost; exiting" and exits 1.
package bootwire
