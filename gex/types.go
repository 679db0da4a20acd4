package gex

import (
	"math"
	"strings"
)

// Rank is a position within, or the size of, an ordered set such as a team
// (gex_Rank_t).
type Rank uint32

// RankInvalid is "not a rank" (GEX_RANK_INVALID): larger than any valid rank.
const RankInvalid Rank = math.MaxUint32

// EPIndex names an endpoint within a process (gex_EP_Index_t). The primordial
// endpoint has index 0.
type EPIndex uint16

// EPLocation is a (jobrank, endpoint index) pair (gex_EP_Location_t).
type EPLocation struct {
	Rank    Rank
	EPIndex EPIndex
}

// Addr is an address in the address space of the process that owns it
// (gex_Addr_t): a remote segment location is named by the owner's address, as
// returned by the owner's Segment.QueryAddr. With the SEG_OFFSET flags it is a
// byte offset into the bound segment instead.
type Addr uintptr

// AMIndex names an AM handler (gex_AM_Index_t).
type AMIndex uint8

// AMArg is a handler argument (gex_AM_Arg_t, a 32-bit signed integer).
type AMArg = int32

// AMIndexBase is the lowest index a client may register at a fixed position
// (GEX_AM_INDEX_BASE); indices below it belong to the library.
const AMIndexBase = 128

// MaxArgs is the largest number of handler arguments (gex_AM_MaxArgs).
const MaxArgs = 16

// AMMaxArgs implements gex_AM_MaxArgs.
func AMMaxArgs() int { return MaxArgs }

// PageSize is GASNET_PAGESIZE: segment sizes are multiples of it.
const PageSize = 4096

// Flags is gex_Flags_t. Bits are disjoint across all flags the library
// defines, so a flag passed to the wrong call is detected.
type Flags uint64

// Flags for communication initiation (GASNet-EX "Flags for point-to-point
// communication initiation") and object creation.
const (
	FlagImmediate            Flags = 1 << 0  // GEX_FLAG_IMMEDIATE
	FlagLCCopyYes            Flags = 1 << 1  // GEX_FLAG_LC_COPY_YES (accepted, no effect)
	FlagLCCopyNo             Flags = 1 << 2  // GEX_FLAG_LC_COPY_NO (accepted, no effect)
	FlagPeerNeverSelf        Flags = 1 << 3  // GEX_FLAG_PEER_NEVER_SELF
	FlagPeerNeverNbrhd       Flags = 1 << 4  // GEX_FLAG_PEER_NEVER_NBRHD
	FlagADMyRank             Flags = 1 << 5  // GEX_FLAG_AD_MY_RANK
	FlagADMyNbrhd            Flags = 1 << 6  // GEX_FLAG_AD_MY_NBRHD
	FlagADAcq                Flags = 1 << 7  // GEX_FLAG_AD_ACQ
	FlagADRel                Flags = 1 << 8  // GEX_FLAG_AD_REL
	FlagRankIsJobrank        Flags = 1 << 9  // GEX_FLAG_RANK_IS_JOBRANK
	FlagAMPrepareLeastClient Flags = 1 << 10 // GEX_FLAG_AM_PREPARE_LEAST_CLIENT
	FlagAMPrepareLeastAlloc  Flags = 1 << 11 // GEX_FLAG_AM_PREPARE_LEAST_ALLOC
	FlagSelfSegUnknown       Flags = 1 << 12 // GEX_FLAG_SELF_SEG_UNKNOWN
	FlagSelfSegSome          Flags = 1 << 13 // GEX_FLAG_SELF_SEG_SOME
	FlagSelfSegBound         Flags = 1 << 14 // GEX_FLAG_SELF_SEG_BOUND
	FlagSelfSegOffset        Flags = 1 << 15 // GEX_FLAG_SELF_SEG_OFFSET
	FlagPeerSegUnknown       Flags = 1 << 16 // GEX_FLAG_PEER_SEG_UNKNOWN
	FlagPeerSegSome          Flags = 1 << 17 // GEX_FLAG_PEER_SEG_SOME
	FlagPeerSegBound         Flags = 1 << 18 // GEX_FLAG_PEER_SEG_BOUND
	FlagPeerSegOffset        Flags = 1 << 19 // GEX_FLAG_PEER_SEG_OFFSET
	FlagADFavorMyRank        Flags = 1 << 20 // GEX_FLAG_AD_FAVOR_MY_RANK
	FlagADFavorMyNbrhd       Flags = 1 << 21 // GEX_FLAG_AD_FAVOR_MY_NBRHD
	FlagADFavorRemote        Flags = 1 << 22 // GEX_FLAG_AD_FAVOR_REMOTE
	FlagTMGlobalScratch      Flags = 1 << 23 // GEX_FLAG_TM_GLOBAL_SCRATCH
	FlagTMLocalScratch       Flags = 1 << 24 // GEX_FLAG_TM_LOCAL_SCRATCH
	FlagTMSymmetricScratch   Flags = 1 << 25 // GEX_FLAG_TM_SYMMETRIC_SCRATCH
	FlagTMNoScratch          Flags = 1 << 26 // GEX_FLAG_TM_NO_SCRATCH
	FlagScratchSegOffset     Flags = 1 << 27 // GEX_FLAG_SCRATCH_SEG_OFFSET
	FlagGloballyQuiesced     Flags = 1 << 28 // GEX_FLAG_GLOBALLY_QUIESCED
	FlagUsesGASNet1          Flags = 1 << 29 // GEX_FLAG_USES_GASNET1
	FlagDeferThreads         Flags = 1 << 30 // GEX_FLAG_DEFER_THREADS
	// FlagEnableLeafLC is GEX_FLAG_ENABLE_LEAF_LC (VIS Put NB/NBI only):
	// local completion of the source payload is exposed as for
	// lc_opt=EventGroup (NBI) or as a leaf event that EventQueryLeaf(root,
	// ECLC) returns (NB).
	FlagEnableLeafLC Flags = 1 << 31

	// Team construction queries (TM Split, Create, Dup): the call returns a
	// scratch size instead of creating a team.
	FlagTMScratchSizeMin         Flags = 1 << 37 // GEX_FLAG_TM_SCRATCH_SIZE_MIN (deprecated in the spec)
	FlagTMScratchSizeRecommended Flags = 1 << 38 // GEX_FLAG_TM_SCRATCH_SIZE_RECOMMENDED
)

// AM handler registration flags (gex_AM_Entry_t.gex_flags, "AM handlers"): one
// category and one request/reply flag must be ORed together.
const (
	FlagAMShort     Flags = 1 << 32                     // GEX_FLAG_AM_SHORT
	FlagAMMedium    Flags = 1 << 33                     // GEX_FLAG_AM_MEDIUM
	FlagAMLong      Flags = 1 << 34                     // GEX_FLAG_AM_LONG
	FlagAMMedLong         = FlagAMMedium | FlagAMLong   // GEX_FLAG_AM_MEDLONG
	FlagAMRequest   Flags = 1 << 35                     // GEX_FLAG_AM_REQUEST
	FlagAMReply     Flags = 1 << 36                     // GEX_FLAG_AM_REPLY
	FlagAMReqRep          = FlagAMRequest | FlagAMReply // GEX_FLAG_AM_REQREP
	amCategoryMask        = FlagAMShort | FlagAMMedLong //
	amReqRepMask          = FlagAMRequest | FlagAMReply //
	amInjectAllowed       = FlagImmediate | FlagLCCopyYes | FlagLCCopyNo | FlagSelfSegUnknown | FlagSelfSegSome | FlagSelfSegBound | FlagPeerSegUnknown | FlagPeerSegSome | FlagPeerSegBound
)

var flagNames = [...]string{
	"IMMEDIATE", "LC_COPY_YES", "LC_COPY_NO", "PEER_NEVER_SELF", "PEER_NEVER_NBRHD",
	"AD_MY_RANK", "AD_MY_NBRHD", "AD_ACQ", "AD_REL", "RANK_IS_JOBRANK",
	"AM_PREPARE_LEAST_CLIENT", "AM_PREPARE_LEAST_ALLOC",
	"SELF_SEG_UNKNOWN", "SELF_SEG_SOME", "SELF_SEG_BOUND", "SELF_SEG_OFFSET",
	"PEER_SEG_UNKNOWN", "PEER_SEG_SOME", "PEER_SEG_BOUND", "PEER_SEG_OFFSET",
	"AD_FAVOR_MY_RANK", "AD_FAVOR_MY_NBRHD", "AD_FAVOR_REMOTE",
	"TM_GLOBAL_SCRATCH", "TM_LOCAL_SCRATCH", "TM_SYMMETRIC_SCRATCH", "TM_NO_SCRATCH",
	"SCRATCH_SEG_OFFSET", "GLOBALLY_QUIESCED", "USES_GASNET1", "DEFER_THREADS", "ENABLE_LEAF_LC",
	"AM_SHORT", "AM_MEDIUM", "AM_LONG", "AM_REQUEST", "AM_REPLY",
	"TM_SCRATCH_SIZE_MIN", "TM_SCRATCH_SIZE_RECOMMENDED",
}

// String spells the set flags as the spec does: "GEX_FLAG_IMMEDIATE|GEX_FLAG_AM_SHORT".
func (f Flags) String() string {
	if f == 0 {
		return "0"
	}
	var parts []string
	for i := 0; i < 64; i++ {
		if f&(1<<i) == 0 {
			continue
		}
		if i < len(flagNames) && flagNames[i] != "" {
			parts = append(parts, "GEX_FLAG_"+flagNames[i])
		} else {
			parts = append(parts, "bit"+itoa(i))
		}
	}
	return strings.Join(parts, "|")
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	neg := i < 0
	if neg {
		i = -i
	}
	var b [20]byte
	n := len(b)
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}

// RankInfo describes one member of a neighbourhood or host (gex_RankInfo_t).
type RankInfo struct {
	JobRank Rank
}

// Position is the result of QueryMyPosition (gex_System_QueryMyPosition).
type Position struct {
	NbrhdSetSize, NbrhdSetRank Rank
	HostSetSize, HostSetRank   Rank
}

// WaitMode selects how the library waits inside blocking calls
// (gasnet_set_waitmode): spinning polls continuously, blocking sleeps in the
// kernel until traffic arrives, spin-then-block spins briefly and then sleeps.
type WaitMode int

// Wait modes. The default is WaitSpinBlock, so that more ranks than cores
// (4 ranks on 2 cores) still make progress.
const (
	WaitSpinBlock WaitMode = iota // GASNET_WAIT_SPINBLOCK
	WaitSpin                      // GASNET_WAIT_SPIN
	WaitBlock                     // GASNET_WAIT_BLOCK
)

func (m WaitMode) String() string {
	switch m {
	case WaitSpin:
		return "GASNET_WAIT_SPIN"
	case WaitBlock:
		return "GASNET_WAIT_BLOCK"
	case WaitSpinBlock:
		return "GASNET_WAIT_SPINBLOCK"
	}
	return "WaitMode(" + itoa(int(m)) + ")"
}
