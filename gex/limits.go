package gex

import "github.com/gexgo/gexgo/internal/conduit"

// GASNet-EX "Active Message (AM) limit queries". Limits depend on the pair of
// endpoints (they are symmetric) and, with the FlagAMPrepareLeast* flags, on
// whether a negotiated-payload Prepare supplies its own buffer. They do not
// depend on lc_opt or numargs in this implementation (monotonic in numargs,
// trivially).

type amKind uint8

const (
	kindReqMedium amKind = iota
	kindRepMedium
	kindReqLong
	kindRepLong
)

var amKindOp = [...]string{"MaxRequestMedium", "MaxReplyMedium", "MaxRequestLong", "MaxReplyLong"}

func limitFor(l conduit.Limits, k amKind, flags Flags) int {
	v := l.MaxMedium
	if k == kindReqLong || k == kindRepLong {
		v = l.MaxLong
	}
	if flags&FlagAMPrepareLeastAlloc != 0 {
		v = min(v, l.MaxAlloc)
	}
	return v
}

func checkLimitArgs(op string, flags Flags, nargs int) error {
	if nargs < 0 || nargs > MaxArgs {
		return badArg(op, "numargs %d out of range [0, %d]", nargs, MaxArgs)
	}
	if flags&FlagAMPrepareLeastClient != 0 && flags&FlagAMPrepareLeastAlloc != 0 {
		return badArg(op, "GEX_FLAG_AM_PREPARE_LEAST_CLIENT and _ALLOC are mutually exclusive")
	}
	if bad := flags &^ (amInjectAllowed | FlagPeerSegOffset | FlagAMPrepareLeastClient | FlagAMPrepareLeastAlloc); bad != 0 {
		return badArg(op, "flags %v are not valid for AM limit queries", bad)
	}
	return nil
}

func (tm *TM) maxPayload(k amKind, other Rank, flags Flags, nargs int) (int, error) {
	op := amKindOp[k]
	if err := checkLimitArgs(op, flags, nargs); err != nil {
		return 0, err
	}
	if other != RankInvalid {
		if err := tm.checkRank(op, other); err != nil {
			return 0, err
		}
		return limitFor(tm.limits(other), k, flags), nil
	}
	m := -1
	for r := Rank(0); r < tm.size; r++ {
		v := limitFor(tm.limits(r), k, flags)
		if m < 0 || v < m {
			m = v
		}
	}
	return m, nil
}

// MaxRequestMedium implements gex_AM_MaxRequestMedium: the largest nbytes for
// RequestMedium between the caller and other (RankInvalid: the minimum over the
// team). With FlagAMPrepareLeast*, the largest least_payload for a Prepare.
// lc_opt does not affect the result and is not taken.
func (tm *TM) MaxRequestMedium(other Rank, flags Flags, nargs int) (int, error) {
	return tm.maxPayload(kindReqMedium, other, flags, nargs)
}

// MaxReplyMedium implements gex_AM_MaxReplyMedium (see MaxRequestMedium).
func (tm *TM) MaxReplyMedium(other Rank, flags Flags, nargs int) (int, error) {
	return tm.maxPayload(kindRepMedium, other, flags, nargs)
}

// MaxRequestLong implements gex_AM_MaxRequestLong (see MaxRequestMedium).
func (tm *TM) MaxRequestLong(other Rank, flags Flags, nargs int) (int, error) {
	return tm.maxPayload(kindReqLong, other, flags, nargs)
}

// MaxReplyLong implements gex_AM_MaxReplyLong (see MaxRequestMedium).
func (tm *TM) MaxReplyLong(other Rank, flags Flags, nargs int) (int, error) {
	return tm.maxPayload(kindRepLong, other, flags, nargs)
}

func (t *Token) maxReply(k amKind, flags Flags, nargs int) (int, error) {
	op := "Token." + amKindOp[k]
	if t == nil || !t.live || !t.isReq {
		return 0, &restrictedError{op: op, why: "outside a Request handler"}
	}
	if err := checkLimitArgs(op, flags, nargs); err != nil {
		return 0, err
	}
	return limitFor(epLimits(t.c.cd.Limits(t.src), t.srcEP), k, flags), nil
}

// limits are the AM payload limits to member r of tm.
func (tm *TM) limits(r Rank) conduit.Limits {
	return epLimits(tm.c.cd.Limits(tm.jobrank(r)), tm.epOf(r))
}

// epLimits adjusts l for an AM to endpoint ep: a Long to a non-primordial
// endpoint is not placed by the conduit but travels in one buffer.
func epLimits(l conduit.Limits, ep uint16) conduit.Limits {
	if ep != 0 {
		l.MaxLong = min(l.MaxLong, l.MaxMedium)
	}
	return l
}

// MaxReplyMedium implements gex_Token_MaxReplyMedium (Request handlers only).
func (t *Token) MaxReplyMedium(flags Flags, nargs int) (int, error) {
	return t.maxReply(kindRepMedium, flags, nargs)
}

// MaxReplyLong implements gex_Token_MaxReplyLong (Request handlers only).
func (t *Token) MaxReplyLong(flags Flags, nargs int) (int, error) {
	return t.maxReply(kindRepLong, flags, nargs)
}

func (c *Client) lub(k amKind) int {
	m := -1
	for r := 0; r < c.size; r++ {
		v := limitFor(c.cd.Limits(r), k, 0)
		if m < 0 || v < m {
			m = v
		}
	}
	return m
}

// AMLUBRequestMedium implements gex_AM_LUBRequestMedium: a bound that holds for
// every peer (gasnet_AMMaxMedium).
func (c *Client) AMLUBRequestMedium() int { return c.lub(kindReqMedium) }

// AMLUBReplyMedium implements gex_AM_LUBReplyMedium.
func (c *Client) AMLUBReplyMedium() int { return c.lub(kindRepMedium) }

// AMLUBRequestLong implements gex_AM_LUBRequestLong (gasnet_AMMaxLongRequest).
func (c *Client) AMLUBRequestLong() int { return c.lub(kindReqLong) }

// AMLUBReplyLong implements gex_AM_LUBReplyLong (gasnet_AMMaxLongReply).
func (c *Client) AMLUBReplyLong() int { return c.lub(kindRepLong) }
