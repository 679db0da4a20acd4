package gasnet

import (
	"fmt"

	"github.com/gexgo/gexgo/gex"
)

// Active Messages the GASNet-1 way (GASNet-1 spec, "Active Messaging
// Interface"): one variadic function per category instead of the
// gasnet_AMRequestShort0..16 macro families. Handlers are checked at the
// initiator against the destination's handler table (exchanged by Attach):
// an AM to a handler the destination did not register is an error naming
// both. The handler rules are enforced by gex: a Request handler may reply
// at most once, to its requester; Reply handlers may not reply; handlers may
// not send requests, poll, wait or block (other than HSLLock).

// AMMaxArgs implements gasnet_AMMaxArgs: 16.
func AMMaxArgs() int { return gex.MaxArgs }

// AMMaxMedium implements gasnet_AMMaxMedium: the largest Medium payload, to
// and from any node.
func (j *Job) AMMaxMedium() int { return j.maxMed }

// AMMaxLongRequest implements gasnet_AMMaxLongRequest: the largest Long
// request payload, to any node.
func (j *Job) AMMaxLongRequest() int { return j.maxLReq }

// AMMaxLongReply implements gasnet_AMMaxLongReply.
func (j *Job) AMMaxLongReply() int { return j.maxLRep }

// hasHandler reports whether node registered handler h (false also for a
// node out of range and before Attach).
func (j *Job) hasHandler(node Node, h Handler) bool {
	i := int(node)*4 + int(h>>6)
	return i < len(j.handlers) && j.handlers[i]&(1<<(h&63)) != 0
}

// amCheckFailed explains why hasHandler or a size check failed.
func (j *Job) amCheckFailed(op string, node Node, h Handler, n, max int) error {
	switch {
	case !j.attached.Load():
		return newErr(op, ErrCodeNotInit, "gasnet_attach has not been called")
	case node >= j.n:
		return newErr(op, ErrCodeBadArg, fmt.Sprintf("node %d out of range: gasnet_nodes() is %d", node, j.n))
	case !j.hasHandler(node, h):
		return newErr(op, ErrCodeBadArg, fmt.Sprintf("handler %d is not registered on node %d", h, node))
	}
	return newErr(op, ErrCodeBadArg, fmt.Sprintf("payload of %d bytes exceeds the maximum %d", n, max))
}

// AMRequestShort implements gasnet_AMRequestShortM (M = len(args), 0..16).
func (j *Job) AMRequestShort(dest Node, h Handler, args ...HandlerArg) error {
	if !j.hasHandler(dest, h) {
		return j.amCheckFailed("gasnet_AMRequestShort", dest, h, 0, 0)
	}
	return j.nis.wrap(j.tm.RequestShort(gex.Rank(dest), h, 0, args...))
}

// AMRequestMedium implements gasnet_AMRequestMediumM: payload (at most
// AMMaxMedium bytes) is copied before the call returns.
func (j *Job) AMRequestMedium(dest Node, h Handler, payload []byte, args ...HandlerArg) error {
	if !j.hasHandler(dest, h) || len(payload) > j.maxMed {
		return j.amCheckFailed("gasnet_AMRequestMedium", dest, h, len(payload), j.maxMed)
	}
	return j.nis.wrap(j.tm.RequestMedium(gex.Rank(dest), h, payload, nil, 0, args...))
}

// AMRequestLong implements gasnet_AMRequestLongM: payload (at most
// AMMaxLongRequest bytes) lands at destAddr in dest's segment before the
// handler runs there.
func (j *Job) AMRequestLong(dest Node, h Handler, payload []byte, destAddr Addr, args ...HandlerArg) error {
	if !j.hasHandler(dest, h) || len(payload) > j.maxLReq {
		return j.amCheckFailed("gasnet_AMRequestLong", dest, h, len(payload), j.maxLReq)
	}
	return j.nis.wrap(j.tm.RequestLong(gex.Rank(dest), h, payload, destAddr, nil, 0, args...))
}

// AMRequestLongAsync implements gasnet_AMRequestLongAsyncM. The payload is
// copied during the call here, so it behaves as AMRequestLong (the spec's
// extra constraints - the handler must reply, the source must stay unchanged
// until the reply handler runs - are permitted but not needed).
func (j *Job) AMRequestLongAsync(dest Node, h Handler, payload []byte, destAddr Addr, args ...HandlerArg) error {
	if !j.hasHandler(dest, h) || len(payload) > j.maxLReq {
		return j.amCheckFailed("gasnet_AMRequestLongAsync", dest, h, len(payload), j.maxLReq)
	}
	return j.nis.wrap(j.tm.RequestLong(gex.Rank(dest), h, payload, destAddr, nil, 0, args...))
}

func errNilToken(op string) error {
	return newErr(op, ErrCodeBadArg, "token is nil (replies are only permitted inside a Request handler, with its token)")
}

// tokenSrc is the node a token's AM came from.
func tokenSrc(t *Token) Node {
	info, _ := t.Info(gex.TISrcRank)
	return Node(info.SrcRank)
}

// AMReplyShort implements gasnet_AMReplyShortM: only inside the Request
// handler that received t, at most once, to the requesting node.
func (j *Job) AMReplyShort(t *Token, h Handler, args ...HandlerArg) error {
	if t == nil {
		return errNilToken("gasnet_AMReplyShort")
	}
	if !j.hasHandler(tokenSrc(t), h) {
		return j.amCheckFailed("gasnet_AMReplyShort", tokenSrc(t), h, 0, 0)
	}
	return t.ReplyShort(h, 0, args...)
}

// AMReplyMedium implements gasnet_AMReplyMediumM.
func (j *Job) AMReplyMedium(t *Token, h Handler, payload []byte, args ...HandlerArg) error {
	if t == nil {
		return errNilToken("gasnet_AMReplyMedium")
	}
	if !j.hasHandler(tokenSrc(t), h) || len(payload) > j.maxMed {
		return j.amCheckFailed("gasnet_AMReplyMedium", tokenSrc(t), h, len(payload), j.maxMed)
	}
	return t.ReplyMedium(h, payload, nil, 0, args...)
}

// AMReplyLong implements gasnet_AMReplyLongM: payload (at most
// AMMaxLongReply bytes) lands at destAddr in the requester's segment.
func (j *Job) AMReplyLong(t *Token, h Handler, payload []byte, destAddr Addr, args ...HandlerArg) error {
	if t == nil {
		return errNilToken("gasnet_AMReplyLong")
	}
	if !j.hasHandler(tokenSrc(t), h) || len(payload) > j.maxLRep {
		return j.amCheckFailed("gasnet_AMReplyLong", tokenSrc(t), h, len(payload), j.maxLRep)
	}
	return t.ReplyLong(h, payload, destAddr, nil, 0, args...)
}

// AMGetMsgSource implements gasnet_AMGetMsgSource: the node that sent the AM
// t names. Only inside the handler t was passed to.
func AMGetMsgSource(t *Token) (Node, error) {
	if t == nil {
		return 0, newErr("gasnet_AMGetMsgSource", ErrCodeBadArg, "token is nil")
	}
	return tokenSrc(t), nil
}

// AMPoll implements gasnet_AMPoll: it runs the handlers of AMs that have
// arrived (and advances barriers). Prohibited in handlers, while holding an
// HSL and in a No-Interrupt Section.
func (j *Job) AMPoll() error {
	if err := j.ready("gasnet_AMPoll"); err != nil {
		return err
	}
	return j.nis.wrap(j.c.Poll())
}
