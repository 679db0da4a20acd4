package portals

import (
	"strconv"
	"strings"
	"time"
)

// NID is ptl_nid_t, the node part of a physical process identifier (Portals 4.3 §3.9.1).
type NID uint32

// PID is ptl_pid_t, the process part of a physical process identifier (Portals 4.3 §3.9.1).
type PID uint32

// Rank is ptl_rank_t, a process's rank on a logically addressed NI (Portals 4.3 §3.9.1).
type Rank uint32

// UID is ptl_uid_t, the usage identifier checked by list entries (Portals 4.3 §3.8).
type UID uint32

// Wildcards and bounds of identifiers (Portals 4.3 §3.3, §3.9).
const (
	NIDAny  NID  = ^NID(0)  // PTL_NID_ANY
	PIDAny  PID  = ^PID(0)  // PTL_PID_ANY
	RankAny Rank = ^Rank(0) // PTL_RANK_ANY
	UIDAny  UID  = ^UID(0)  // PTL_UID_ANY
	// PIDMax is PTL_PID_MAX: a requested pid must be below it (Portals 4.3 §3.6.2).
	PIDMax PID = 1 << 16
)

// ProcessID is ptl_process_t (Portals 4.3 §3.9.1). The C type is a union of {nid, pid} and
// rank; here both halves are fields: physically addressed NIs use NID and PID, logically
// addressed NIs use Rank.
type ProcessID struct {
	NID  NID
	PID  PID
	Rank Rank
}

// Phys returns the ProcessID of the physical address (nid, pid).
func Phys(nid NID, pid PID) ProcessID { return ProcessID{NID: nid, PID: pid} }

// RankID returns the ProcessID of a rank on a logical NI.
func RankID(r Rank) ProcessID { return ProcessID{Rank: r} }

func (p ProcessID) String() string {
	return "{nid " + strconv.FormatUint(uint64(p.NID), 10) + ", pid " + strconv.FormatUint(uint64(p.PID), 10) +
		", rank " + strconv.FormatUint(uint64(p.Rank), 10) + "}"
}

// MatchBits is ptl_match_bits_t (Portals 4.3 §3.3).
type MatchBits uint64

// PTIndex is ptl_pt_index_t, an index into a portal table (Portals 4.3 §3.7).
type PTIndex uint32

// PTAny is PTL_PT_ANY: let PTAlloc choose a free index.
const PTAny PTIndex = ^PTIndex(0)

// Interface is ptl_interface_t: which physical NI (Portals 4.3 §3.6.2). This implementation
// offers interfaces 0 to MaxInterface; each one is its own physical NI with its own physical
// ID (a process with two interfaces has two pids), IfaceDefault is interface 0.
type Interface uint32

const (
	IfaceDefault Interface = ^Interface(0) // PTL_IFACE_DEFAULT
	MaxInterface Interface = 15
)

// TimeForever is PTL_TIME_FOREVER for EQPoll and CTPoll (Portals 4.3 §3.3).
const TimeForever time.Duration = -1

// SizeMax is PTL_SIZE_MAX.
const SizeMax = ^uint64(0)

// Version of the specification implemented (Portals 4.3 §3.2.1).
const (
	MajorVersion = 4 // PTL_MAJOR_VERSION
	MinorVersion = 3 // PTL_MINOR_VERSION
)

// List is ptl_list_t (Portals 4.3 §3.11.2).
type List uint8

const (
	PriorityList List = iota // PTL_PRIORITY_LIST
	OverflowList             // PTL_OVERFLOW_LIST
)

func (l List) String() string {
	return enumString(int(l), []string{"PTL_PRIORITY_LIST", "PTL_OVERFLOW_LIST"}, "ptl_list_t")
}

// enumString is the spec's spelling of an enumeration value, or type(value) when it has none.
func enumString(v int, names []string, typ string) string {
	if v >= 0 && v < len(names) {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(v) + ")"
}

// SearchOp is ptl_search_op_t (Portals 4.3 §3.11.4).
type SearchOp uint8

const (
	SearchOnly   SearchOp = iota // PTL_SEARCH_ONLY
	SearchDelete                 // PTL_SEARCH_DELETE
)

func (s SearchOp) String() string {
	return enumString(int(s), []string{"PTL_SEARCH_ONLY", "PTL_SEARCH_DELETE"}, "ptl_search_op_t")
}

// AckReq is ptl_ack_req_t (Portals 4.3 §3.15.1).
type AckReq uint8

const (
	NoAckReq   AckReq = iota // PTL_NO_ACK_REQ
	AckReqFull               // PTL_ACK_REQ
	CTAckReq                 // PTL_CT_ACK_REQ
	OCAckReq                 // PTL_OC_ACK_REQ
)

func (a AckReq) String() string {
	return enumString(int(a), []string{"PTL_NO_ACK_REQ", "PTL_ACK_REQ", "PTL_CT_ACK_REQ", "PTL_OC_ACK_REQ"}, "ptl_ack_req_t")
}

// SRIndex is ptl_sr_index_t, a status register (Portals 4.3 §3.3.7).
type SRIndex uint8

const (
	SRDropCount            SRIndex = iota // PTL_SR_DROP_COUNT
	SRPermissionViolations                // PTL_SR_PERMISSION_VIOLATIONS
	SROperationViolations                 // PTL_SR_OPERATION_VIOLATIONS
	// SRMalformed counts messages addressed to this NI that failed the wire checks (bad
	// lengths, unknown operations, out-of-range fields) and were dropped. It is an
	// implementation-defined register (§3.3.7 allows more than the three required).
	SRMalformed
	numSR
)

func (s SRIndex) String() string {
	return enumString(int(s), []string{"PTL_SR_DROP_COUNT", "PTL_SR_PERMISSION_VIOLATIONS", "PTL_SR_OPERATION_VIOLATIONS",
		"PTL_SR_MALFORMED"}, "ptl_sr_index_t")
}

// Features is the features bit set of ptl_ni_limits_t (Portals 4.3 §3.6.1).
type Features uint32

const (
	TargetBindInaccessible Features = 1 << iota // PTL_TARGET_BIND_INACCESSIBLE
	TotalDataOrdering                           // PTL_TOTAL_DATA_ORDERING
	CoherentAtomics                             // PTL_COHERENT_ATOMICS
)

func (f Features) String() string {
	return bitString(uint64(f), []string{"PTL_TARGET_BIND_INACCESSIBLE", "PTL_TOTAL_DATA_ORDERING", "PTL_COHERENT_ATOMICS"})
}

// NIOptions is the options argument of PtlNIInit (Portals 4.3 §3.6.2).
type NIOptions uint32

const (
	NIMatching   NIOptions = 1 << iota // PTL_NI_MATCHING
	NINoMatching                       // PTL_NI_NO_MATCHING
	NILogical                          // PTL_NI_LOGICAL
	NIPhysical                         // PTL_NI_PHYSICAL
)

func (o NIOptions) String() string {
	return bitString(uint64(o), []string{"PTL_NI_MATCHING", "PTL_NI_NO_MATCHING", "PTL_NI_LOGICAL", "PTL_NI_PHYSICAL"})
}

// PTOptions is the options argument of PtlPTAlloc (Portals 4.3 §3.7.1).
type PTOptions uint32

const (
	PTOnlyUseOnce   PTOptions = 1 << iota // PTL_PT_ONLY_USE_ONCE
	PTOnlyTruncate                        // PTL_PT_ONLY_TRUNCATE
	PTFlowCtrl                            // PTL_PT_FLOWCTRL
	PTAllocDisabled                       // PTL_PT_ALLOC_DISABLED
)

func (o PTOptions) String() string {
	return bitString(uint64(o), []string{"PTL_PT_ONLY_USE_ONCE", "PTL_PT_ONLY_TRUNCATE", "PTL_PT_FLOWCTRL", "PTL_PT_ALLOC_DISABLED"})
}

// MDOptions is the options field of ptl_md_t (Portals 4.3 §3.10.1).
type MDOptions uint32

const (
	MDEventSendDisable    MDOptions = 1 << iota // PTL_MD_EVENT_SEND_DISABLE
	MDEventSuccessDisable                       // PTL_MD_EVENT_SUCCESS_DISABLE
	MDEventCTSend                               // PTL_MD_EVENT_CT_SEND
	MDEventCTReply                              // PTL_MD_EVENT_CT_REPLY
	MDEventCTAck                                // PTL_MD_EVENT_CT_ACK
	MDEventCTBytes                              // PTL_MD_EVENT_CT_BYTES
	MDUnordered                                 // PTL_MD_UNORDERED
	MDVolatile                                  // PTL_MD_VOLATILE
	MDUnreliable                                // PTL_MD_UNRELIABLE
	MDIovec                                     // PTL_IOVEC
)

var mdOptionNames = []string{"PTL_MD_EVENT_SEND_DISABLE", "PTL_MD_EVENT_SUCCESS_DISABLE", "PTL_MD_EVENT_CT_SEND",
	"PTL_MD_EVENT_CT_REPLY", "PTL_MD_EVENT_CT_ACK", "PTL_MD_EVENT_CT_BYTES", "PTL_MD_UNORDERED", "PTL_MD_VOLATILE",
	"PTL_MD_UNRELIABLE", "PTL_IOVEC"}

func (o MDOptions) String() string { return bitString(uint64(o), mdOptionNames) }

// EntryOptions is the options field of ptl_le_t and ptl_me_t (Portals 4.3 §3.11.1, §3.12.1).
// The ME-only options (ManageLocal, LocalIncUHRLength, NoTruncate, MayAlign) are rejected
// by LEAppend and LESearch.
type EntryOptions uint32

const (
	OpPut                EntryOptions = 1 << iota // PTL_LE_OP_PUT / PTL_ME_OP_PUT
	OpGet                                         // PTL_LE_OP_GET / PTL_ME_OP_GET
	UseOnce                                       // PTL_LE_USE_ONCE / PTL_ME_USE_ONCE
	UnexpectedHdrDisable                          // PTL_LE/ME_UNEXPECTED_HDR_DISABLE
	EntryIovec                                    // PTL_IOVEC
	IsAccessible                                  // PTL_LE/ME_IS_ACCESSIBLE
	EventLinkDisable                              // PTL_LE/ME_EVENT_LINK_DISABLE
	EventCommDisable                              // PTL_LE/ME_EVENT_COMM_DISABLE
	EventFlowCtrlDisable                          // PTL_LE/ME_EVENT_FLOWCTRL_DISABLE
	EventSuccessDisable                           // PTL_LE/ME_EVENT_SUCCESS_DISABLE
	EventOverDisable                              // PTL_LE/ME_EVENT_OVER_DISABLE
	EventUnlinkDisable                            // PTL_LE/ME_EVENT_UNLINK_DISABLE
	EventCTComm                                   // PTL_LE/ME_EVENT_CT_COMM
	EventCTOverflow                               // PTL_LE/ME_EVENT_CT_OVERFLOW
	EventCTBytes                                  // PTL_LE/ME_EVENT_CT_BYTES
	ManageLocal                                   // PTL_ME_MANAGE_LOCAL
	LocalIncUHRLength                             // PTL_ME_LOCAL_INC_UH_RLENGTH
	NoTruncate                                    // PTL_ME_NO_TRUNCATE
	MayAlign                                      // PTL_ME_MAY_ALIGN
	entryOptionsEnd
)

// meOnlyOptions are the ME options that have no LE spelling (Portals 4.3 §3.12.1).
const meOnlyOptions = ManageLocal | LocalIncUHRLength | NoTruncate | MayAlign

var entryOptionNames = []string{"OP_PUT", "OP_GET", "USE_ONCE", "UNEXPECTED_HDR_DISABLE", "PTL_IOVEC",
	"IS_ACCESSIBLE", "EVENT_LINK_DISABLE", "EVENT_COMM_DISABLE", "EVENT_FLOWCTRL_DISABLE",
	"EVENT_SUCCESS_DISABLE", "EVENT_OVER_DISABLE", "EVENT_UNLINK_DISABLE", "EVENT_CT_COMM",
	"EVENT_CT_OVERFLOW", "EVENT_CT_BYTES", "PTL_ME_MANAGE_LOCAL", "PTL_ME_LOCAL_INC_UH_RLENGTH",
	"PTL_ME_NO_TRUNCATE", "PTL_ME_MAY_ALIGN"}

// String gives the ME spelling (PTL_ME_OP_PUT|...); the LE spelling differs only in "LE".
func (o EntryOptions) String() string {
	names := make([]string, len(entryOptionNames))
	for i, n := range entryOptionNames {
		if strings.HasPrefix(n, "PTL_") {
			names[i] = n
		} else {
			names[i] = "PTL_ME_" + n
		}
	}
	return bitString(uint64(o), names)
}

func bitString(v uint64, names []string) string {
	if v == 0 {
		return "0"
	}
	var b strings.Builder
	for i, n := range names {
		if v&(1<<uint(i)) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(n)
			v &^= 1 << uint(i)
		}
	}
	if v != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("0x" + strconv.FormatUint(v, 16))
	}
	return b.String()
}

// Limits is ptl_ni_limits_t (Portals 4.3 §3.6.1). In a desired argument, a zero field means
// "the implementation decides" (the default).
type Limits struct {
	MaxEntries           int
	MaxUnexpectedHeaders int
	MaxMDs               int
	MaxCTs               int
	MaxEQs               int
	MaxPTIndex           int
	MaxIovecs            int
	MaxListSize          int
	MaxTriggeredOps      int
	MaxMsgSize           uint64
	MaxAtomicSize        uint64
	MaxFetchAtomicSize   uint64
	MaxWAWOrderedSize    uint64
	MaxWAROrderedSize    uint64
	MaxVolatileSize      uint64
	Features             Features
}

// EventKind is ptl_event_kind_t (Portals 4.3 §3.13.1).
type EventKind uint8

const (
	EventGet                 EventKind = iota // PTL_EVENT_GET
	EventGetOverflow                          // PTL_EVENT_GET_OVERFLOW
	EventPut                                  // PTL_EVENT_PUT
	EventPutOverflow                          // PTL_EVENT_PUT_OVERFLOW
	EventAtomic                               // PTL_EVENT_ATOMIC
	EventAtomicOverflow                       // PTL_EVENT_ATOMIC_OVERFLOW
	EventFetchAtomic                          // PTL_EVENT_FETCH_ATOMIC
	EventFetchAtomicOverflow                  // PTL_EVENT_FETCH_ATOMIC_OVERFLOW
	EventReply                                // PTL_EVENT_REPLY
	EventSend                                 // PTL_EVENT_SEND
	EventAck                                  // PTL_EVENT_ACK
	EventPTDisabled                           // PTL_EVENT_PT_DISABLED
	EventLink                                 // PTL_EVENT_LINK
	EventAutoUnlink                           // PTL_EVENT_AUTO_UNLINK
	EventAutoFree                             // PTL_EVENT_AUTO_FREE
	EventSearch                               // PTL_EVENT_SEARCH
	EventError                                // PTL_EVENT_ERROR
	numEventKinds
)

var eventKindNames = [...]string{"PTL_EVENT_GET", "PTL_EVENT_GET_OVERFLOW", "PTL_EVENT_PUT", "PTL_EVENT_PUT_OVERFLOW",
	"PTL_EVENT_ATOMIC", "PTL_EVENT_ATOMIC_OVERFLOW", "PTL_EVENT_FETCH_ATOMIC", "PTL_EVENT_FETCH_ATOMIC_OVERFLOW",
	"PTL_EVENT_REPLY", "PTL_EVENT_SEND", "PTL_EVENT_ACK", "PTL_EVENT_PT_DISABLED", "PTL_EVENT_LINK",
	"PTL_EVENT_AUTO_UNLINK", "PTL_EVENT_AUTO_FREE", "PTL_EVENT_SEARCH", "PTL_EVENT_ERROR"}

func (k EventKind) String() string { return enumString(int(k), eventKindNames[:], "ptl_event_kind_t") }

// NIFail is ptl_ni_fail_t (Portals 4.3 §3.13.3).
type NIFail uint8

const (
	NIOK            NIFail = iota // PTL_NI_OK
	NIUndeliverable               // PTL_NI_UNDELIVERABLE
	NIPTDisabled                  // PTL_NI_PT_DISABLED
	NIDropped                     // PTL_NI_DROPPED
	NIPermViolation               // PTL_NI_PERM_VIOLATION
	NIOpViolation                 // PTL_NI_OP_VIOLATION
	NISegv                        // PTL_NI_SEGV
	NINoMatch                     // PTL_NI_NO_MATCH
	numNIFail
)

var niFailNames = [...]string{"PTL_NI_OK", "PTL_NI_UNDELIVERABLE", "PTL_NI_PT_DISABLED", "PTL_NI_DROPPED",
	"PTL_NI_PERM_VIOLATION", "PTL_NI_OP_VIOLATION", "PTL_NI_SEGV", "PTL_NI_NO_MATCH"}

func (f NIFail) String() string { return enumString(int(f), niFailNames[:], "ptl_ni_fail_t") }

// Event is ptl_event_t (Portals 4.3 §3.13.4). Start is the target memory the operation used,
// from the offset actually used and of MLength bytes (for an iovec entry, the bytes of the
// element holding that offset); nil where the event defines no start.
type Event struct {
	Start        []byte
	UserPtr      uint64
	HdrData      uint64
	MatchBits    MatchBits
	RLength      uint64
	MLength      uint64
	RemoteOffset uint64
	UID          UID
	Initiator    ProcessID
	Type         EventKind
	List         List
	PTIndex      PTIndex
	NIFail       NIFail
	AtomicOp     AtomicOp
	AtomicType   Datatype
}

// CTEvent is ptl_ct_event_t (Portals 4.3 §3.14.1).
type CTEvent struct {
	Success uint64
	Failure uint64
}

// IOVec is one element of an iovec region (ptl_iovec_t, Portals 4.3 §3.10.2).
type IOVec = []byte

// MD is ptl_md_t (Portals 4.3 §3.10.1). Buf is the region (start and length); with MDIovec,
// Iov lists the elements instead and Buf is unused.
type MD struct {
	Buf     []byte
	Iov     []IOVec
	Options MDOptions
	EQ      EQHandle // EQNone (the zero value) for no full events
	CT      CTHandle // CTNone (the zero value) for no counting events
}

// LE is ptl_le_t (Portals 4.3 §3.11.1).
type LE struct {
	Buf     []byte
	Iov     []IOVec // with EntryIovec
	CT      CTHandle
	UID     UID
	Options EntryOptions
}

// ME is ptl_me_t (Portals 4.3 §3.12.1).
type ME struct {
	Buf        []byte
	Iov        []IOVec // with EntryIovec
	CT         CTHandle
	UID        UID
	Options    EntryOptions
	MatchID    ProcessID
	MatchBits  MatchBits
	IgnoreBits MatchBits
	MinFree    uint64
}
