package bootwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// MaxFrame is the largest value of a frame's length field: the type byte and
// the body together are at most 64 MiB.
const MaxFrame = 64 << 20

// HeaderLen is the size of the length field that precedes every frame.
const HeaderLen = 4

// ErrMalformed is wrapped by every decoding error caused by the bytes
// themselves (as opposed to an I/O error of the underlying reader).
var ErrMalformed = errors.New("bootwire: malformed frame")

// Type is a frame's type byte.
type Type uint8

// Frame types. Rank-to-launcher types have the high bit clear,
// launcher-to-rank types have it set.
const (
	TypeHello      Type = 0x01 // HELLO: rank u32, size u32, pid u32
	TypeGather     Type = 0x02 // GATHER: seq u32, data
	TypeExit       Type = 0x03 // EXIT: code i32
	TypeAbort      Type = 0x04 // ABORT: msg
	TypeWelcome    Type = 0x81 // WELCOME: empty
	TypeGathered   Type = 0x82 // GATHERED: seq u32, n u32, n x (len u32, bytes)
	TypeExitNow    Type = 0x83 // EXITNOW: code i32
	TypeReject     Type = 0x84 // REJECT: msg
	TypeGatherFail Type = 0x85 // GATHERFAIL: seq u32, msg
	TypeFinalize   Type = 0x05 // FINALIZE: empty
	TypeProgress   Type = 0x06 // PROGRESS: count u64, msg
	TypeFinalized  Type = 0x86 // FINALIZED: empty
	TypePeerLeft   Type = 0x87 // PEERLEFT: rank u32, code i32, delay_ms u32, msg
)

// String returns the protocol's spelling of t ("HELLO", "GATHERED", ...), or
// "TYPE(0xNN)" for an unknown type.
func (t Type) String() string {
	switch t {
	case TypeHello:
		return "HELLO"
	case TypeGather:
		return "GATHER"
	case TypeExit:
		return "EXIT"
	case TypeAbort:
		return "ABORT"
	case TypeWelcome:
		return "WELCOME"
	case TypeGathered:
		return "GATHERED"
	case TypeExitNow:
		return "EXITNOW"
	case TypeReject:
		return "REJECT"
	case TypeGatherFail:
		return "GATHERFAIL"
	case TypeFinalize:
		return "FINALIZE"
	case TypeProgress:
		return "PROGRESS"
	case TypeFinalized:
		return "FINALIZED"
	case TypePeerLeft:
		return "PEERLEFT"
	}
	return "TYPE(0x" + strconv.FormatUint(uint64(t), 16) + ")"
}

// Msg is one decoded frame: one of *Hello, *Gather, *Exit, *Abort, *Finalize,
// *Progress, *Welcome, *Gathered, *ExitNow, *Reject, *GatherFail, *Finalized,
// *PeerLeft. The set is closed.
type Msg interface {
	// Type is the frame type of the message.
	Type() Type
	bodyLen() int
	appendBody(b []byte) []byte
}

// Hello is the first frame a rank sends on a new connection.
type Hello struct {
	Rank, Size, PID uint32
}

// Gather is one rank's contribution to the all-gather number Seq (1, 2, ...).
type Gather struct {
	Seq  uint32
	Data []byte
}

// Exit asks the launcher to end the job with exit code Code.
type Exit struct {
	Code int32
}

// Abort reports a fatal error of the sending rank.
type Abort struct {
	Msg string
}

// Welcome accepts a Hello.
type Welcome struct{}

// Gathered is the result of all-gather Seq: Parts[r] is rank r's contribution.
type Gathered struct {
	Seq   uint32
	Parts [][]byte
}

// ExitNow tells a rank to exit with Code; it also acknowledges Exit and Abort.
type ExitNow struct {
	Code int32
}

// Reject refuses a Hello; Msg says why.
type Reject struct {
	Msg string
}

// GatherFail reports that all-gather Seq cannot complete; Msg says why.
type GatherFail struct {
	Seq uint32
	Msg string
}

// Finalize says that the sending rank called Close: its process may end
// now without ending the job.
type Finalize struct{}

// Progress reports a rank's communication progress to a launcher watching
// for hangs: Count grows with every AM sent or delivered; Msg says what the
// rank waits on ("" when it is not waiting).
type Progress struct {
	Count uint64
	Msg   string
}

// Finalized acknowledges Finalize.
type Finalized struct{}

// PeerLeft tells a rank that rank Rank left the job while this rank was
// still in it (Msg: the launcher's words): the job ends with Code; the rank
// fails its pending waits and exits with Code after DelayMS milliseconds.
type PeerLeft struct {
	Rank    uint32
	Code    int32
	DelayMS uint32
	Msg     string
}

// Type implements Msg.
func (*Finalize) Type() Type { return TypeFinalize }

// Type implements Msg.
func (*Progress) Type() Type { return TypeProgress }

// Type implements Msg.
func (*Finalized) Type() Type { return TypeFinalized }

// Type implements Msg.
func (*PeerLeft) Type() Type { return TypePeerLeft }

// Type implements Msg.
func (*Hello) Type() Type { return TypeHello }

// Type implements Msg.
func (*Gather) Type() Type { return TypeGather }

// Type implements Msg.
func (*Exit) Type() Type { return TypeExit }

// Type implements Msg.
func (*Abort) Type() Type { return TypeAbort }

// Type implements Msg.
func (*Welcome) Type() Type { return TypeWelcome }

// Type implements Msg.
func (*Gathered) Type() Type { return TypeGathered }

// Type implements Msg.
func (*ExitNow) Type() Type { return TypeExitNow }

// Type implements Msg.
func (*Reject) Type() Type { return TypeReject }

// Type implements Msg.
func (*GatherFail) Type() Type { return TypeGatherFail }

func (*Hello) bodyLen() int        { return 12 }
func (m *Gather) bodyLen() int     { return 4 + len(m.Data) }
func (*Exit) bodyLen() int         { return 4 }
func (m *Abort) bodyLen() int      { return len(m.Msg) }
func (*Welcome) bodyLen() int      { return 0 }
func (*ExitNow) bodyLen() int      { return 4 }
func (m *Reject) bodyLen() int     { return len(m.Msg) }
func (m *GatherFail) bodyLen() int { return 4 + len(m.Msg) }
func (*Finalize) bodyLen() int     { return 0 }
func (m *Progress) bodyLen() int   { return 8 + len(m.Msg) }
func (*Finalized) bodyLen() int    { return 0 }
func (m *PeerLeft) bodyLen() int   { return 12 + len(m.Msg) }
func (m *Gathered) bodyLen() int {
	n := 8
	for _, p := range m.Parts {
		n += 4 + len(p)
	}
	return n
}

var le = binary.LittleEndian

func (m *Hello) appendBody(b []byte) []byte {
	b = le.AppendUint32(b, m.Rank)
	b = le.AppendUint32(b, m.Size)
	return le.AppendUint32(b, m.PID)
}
func (m *Gather) appendBody(b []byte) []byte {
	return append(le.AppendUint32(b, m.Seq), m.Data...)
}
func (m *Exit) appendBody(b []byte) []byte    { return le.AppendUint32(b, uint32(m.Code)) }
func (m *Abort) appendBody(b []byte) []byte   { return append(b, m.Msg...) }
func (*Welcome) appendBody(b []byte) []byte   { return b }
func (m *ExitNow) appendBody(b []byte) []byte { return le.AppendUint32(b, uint32(m.Code)) }
func (m *Reject) appendBody(b []byte) []byte  { return append(b, m.Msg...) }
func (m *GatherFail) appendBody(b []byte) []byte {
	return append(le.AppendUint32(b, m.Seq), m.Msg...)
}
func (*Finalize) appendBody(b []byte) []byte  { return b }
func (*Finalized) appendBody(b []byte) []byte { return b }
func (m *Progress) appendBody(b []byte) []byte {
	return append(le.AppendUint64(b, m.Count), m.Msg...)
}
func (m *PeerLeft) appendBody(b []byte) []byte {
	b = le.AppendUint32(b, m.Rank)
	b = le.AppendUint32(b, uint32(m.Code))
	b = le.AppendUint32(b, m.DelayMS)
	return append(b, m.Msg...)
}
func (m *Gathered) appendBody(b []byte) []byte {
	b = le.AppendUint32(b, m.Seq)
	b = le.AppendUint32(b, uint32(len(m.Parts)))
	for _, p := range m.Parts {
		b = le.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// FrameLen returns the value of m's length field (type byte plus body).
func FrameLen(m Msg) int { return 1 + m.bodyLen() }

// Append appends the frame encoding m to dst. It fails, leaving dst
// unchanged, if the frame would exceed MaxFrame.
func Append(dst []byte, m Msg) ([]byte, error) {
	n := FrameLen(m)
	if n > MaxFrame {
		return dst, fmt.Errorf("bootwire: %v frame of %d bytes exceeds the maximum of %d bytes", m.Type(), n, MaxFrame)
	}
	dst = le.AppendUint32(dst, uint32(n))
	dst = append(dst, byte(m.Type()))
	return m.appendBody(dst), nil
}

// WriteMsg writes m as one frame to w with a single Write call.
func WriteMsg(w io.Writer, m Msg) error {
	b, err := Append(make([]byte, 0, HeaderLen+FrameLen(m)), m)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Decode decodes the frame at the start of b and returns it and the number of
// bytes it occupies. If b holds less than a whole frame, the error wraps
// io.ErrUnexpectedEOF; every other failure wraps ErrMalformed. The decoded
// message's byte slices and strings are copies: b may be reused.
func Decode(b []byte) (Msg, int, error) {
	if len(b) < HeaderLen {
		return nil, 0, fmt.Errorf("bootwire: frame header of %d bytes: %w", len(b), io.ErrUnexpectedEOF)
	}
	n, err := checkLen(le.Uint32(b))
	if err != nil {
		return nil, 0, err
	}
	if len(b)-HeaderLen < n {
		return nil, 0, fmt.Errorf("bootwire: frame of %d bytes, have %d: %w", n, len(b)-HeaderLen, io.ErrUnexpectedEOF)
	}
	frame := b[HeaderLen : HeaderLen+n]
	m, err := decodeBody(Type(frame[0]), frame[1:], true)
	if err != nil {
		return nil, 0, err
	}
	return m, HeaderLen + n, nil
}

// ReadMsg reads one frame from r. At a clean end of stream (no byte of a new
// frame) it returns io.EOF; a stream ending inside a frame gives an error
// wrapping io.ErrUnexpectedEOF. The message owns its memory.
func ReadMsg(r io.Reader) (Msg, error) {
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n, err := checkLen(le.Uint32(h[:]))
	if err != nil {
		return nil, err
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(r, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("bootwire: reading a frame of %d bytes: %w", n, err)
	}
	// frame is ours: messages may alias it.
	return decodeBody(Type(frame[0]), frame[1:], false)
}

func checkLen(n uint32) (int, error) {
	if n == 0 {
		return 0, fmt.Errorf("%w: length 0 (want at least 1, the type byte)", ErrMalformed)
	}
	if n > MaxFrame {
		return 0, fmt.Errorf("%w: length %d exceeds the maximum of %d", ErrMalformed, n, MaxFrame)
	}
	return int(n), nil
}

func bodyErr(t Type, format string, args ...any) error {
	return fmt.Errorf("%w: %v: %s", ErrMalformed, t, fmt.Sprintf(format, args...))
}

// decodeBody decodes the body of a frame of type t. If copyOut is false the
// message aliases body.
func decodeBody(t Type, body []byte, copyOut bool) (Msg, error) {
	bytesOf := func(p []byte) []byte {
		if copyOut {
			return bytes.Clone(p)
		}
		return p
	}
	fixed := func(want int) error {
		if len(body) != want {
			return bodyErr(t, "body is %d bytes, want %d", len(body), want)
		}
		return nil
	}
	atLeast := func(want int) error {
		if len(body) < want {
			return bodyErr(t, "body is %d bytes, want at least %d", len(body), want)
		}
		return nil
	}
	switch t {
	case TypeHello:
		if err := fixed(12); err != nil {
			return nil, err
		}
		return &Hello{Rank: le.Uint32(body), Size: le.Uint32(body[4:]), PID: le.Uint32(body[8:])}, nil
	case TypeGather:
		if err := atLeast(4); err != nil {
			return nil, err
		}
		return &Gather{Seq: le.Uint32(body), Data: bytesOf(body[4:])}, nil
	case TypeExit:
		if err := fixed(4); err != nil {
			return nil, err
		}
		return &Exit{Code: int32(le.Uint32(body))}, nil
	case TypeAbort:
		return &Abort{Msg: string(body)}, nil
	case TypeWelcome:
		if err := fixed(0); err != nil {
			return nil, err
		}
		return &Welcome{}, nil
	case TypeExitNow:
		if err := fixed(4); err != nil {
			return nil, err
		}
		return &ExitNow{Code: int32(le.Uint32(body))}, nil
	case TypeReject:
		return &Reject{Msg: string(body)}, nil
	case TypeGatherFail:
		if err := atLeast(4); err != nil {
			return nil, err
		}
		return &GatherFail{Seq: le.Uint32(body), Msg: string(body[4:])}, nil
	case TypeFinalize:
		if err := fixed(0); err != nil {
			return nil, err
		}
		return &Finalize{}, nil
	case TypeFinalized:
		if err := fixed(0); err != nil {
			return nil, err
		}
		return &Finalized{}, nil
	case TypeProgress:
		if err := atLeast(8); err != nil {
			return nil, err
		}
		return &Progress{Count: le.Uint64(body), Msg: string(body[8:])}, nil
	case TypePeerLeft:
		if err := atLeast(12); err != nil {
			return nil, err
		}
		return &PeerLeft{Rank: le.Uint32(body), Code: int32(le.Uint32(body[4:])), DelayMS: le.Uint32(body[8:]), Msg: string(body[12:])}, nil
	case TypeGathered:
		if err := atLeast(8); err != nil {
			return nil, err
		}
		seq, n := le.Uint32(body), le.Uint32(body[4:])
		rest := body[8:]
		// Every part takes at least its 4-byte length: bound n by the bytes
		// present before allocating.
		if uint64(n) > uint64(len(rest)/4) {
			return nil, bodyErr(t, "%d parts cannot fit in %d bytes", n, len(rest))
		}
		parts := make([][]byte, n)
		for i := range parts {
			if len(rest) < 4 {
				return nil, bodyErr(t, "part %d of %d: length field truncated", i, n)
			}
			l := le.Uint32(rest)
			rest = rest[4:]
			if uint64(l) > uint64(len(rest)) {
				return nil, bodyErr(t, "part %d of %d: length %d exceeds the %d bytes left", i, n, l, len(rest))
			}
			parts[i] = bytesOf(rest[:l:l])
			rest = rest[l:]
		}
		if len(rest) != 0 {
			return nil, bodyErr(t, "%d bytes after the last of %d parts", len(rest), n)
		}
		return &Gathered{Seq: seq, Parts: parts}, nil
	}
	return nil, fmt.Errorf("%w: unknown frame type %v", ErrMalformed, t)
}
