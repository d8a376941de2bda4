package dataplane

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/internal/connid"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// A tool call is a side effect, and a reconnecting xAgent may send the
// same tool.invoke again. Common Protocol §8.19 asks a side-effecting tool
// to "support idempotency or repeated-call detection" and says no more,
// so the Server detects the repeat itself: a tool.invoke whose
// connector_channel_id, request_id, tool_id and arguments equal those of
// one already answered (or still running) gets that answer, with its own
// reply_to, and the handler does not run again. A request without a
// request_id, or one reusing a request_id for another call, is a new call.
//
// Each call is recorded twice. Its answer is kept in memory within the
// bounds below, for a replay during the session or a reconnect. And before
// the handler runs, a record of the call (its channel, request_id and
// content) is written to the Server's completed store (imv2.Options.Completed:
// boltstore or pgstore where the Connector has one), which outlives a
// restart and shares its capacity per connector_id as it does for
// messages; when the handler returns, a second record says how the call
// ended (succeeded, with its result where the store is an
// state.ResultStore and the result is at most state.MaxResultBytes, or
// failed with its code), written before the answer is sent. A replay the
// memory no longer answers — after a restart, a SIGKILL included — finds
// those records and runs nothing: a success is answered with its kept
// result, a failure with its code, a success whose result was not kept
// tool_invoke_failed saying it succeeded, a call cut off by a crash
// tool_invoke_failed saying its end is unknown. The handler runs at most
// once per call. The memory bounds (W13):
const (
	// toolReplayTTL is how long an answer is kept after its call began.
	toolReplayTTL = 10 * time.Minute
	// toolReplaysPerPeer bounds the calls kept per connector_id; the
	// oldest of that peer goes first.
	toolReplaysPerPeer = 256
	// toolReplaysTotal and toolReplayBytes bound them per Server, by
	// count and by the bytes of their results and error texts. When
	// either is reached, the oldest call of the connector_id holding the
	// most goes first, so a peer's flood evicts its own answers before
	// another's: with up to toolReplaysTotal/toolReplaysPerPeer (16)
	// peers nobody loses one, with more the peers holding fewest keep
	// theirs.
	toolReplaysTotal = 4096
	toolReplayBytes  = 16 << 20
)

// toolReplays is the Server's record of tool calls by request (W13).
type toolReplays struct {
	clock clock.Clock
	mu    sync.Mutex
	calls map[toolKey]*toolCall
	order list.List // of *toolCall, oldest first
	peers map[string]int
	bytes int
}

type toolKey struct{ channel, requestID string }

// toolCall is one tool.invoke: running until done is closed, answered
// after.
type toolCall struct {
	key   toolKey
	peer  string
	sum   [sha256.Size]byte // tool_id and arguments
	began time.Time
	elem  *list.Element
	done  chan struct{}
	ans   toolAnswer // set before done is closed
	size  int
}

// toolAnswer is what a tool.invoke.ack says: a result, or an envelope
// error.
type toolAnswer struct {
	toolID string
	result json.RawMessage
	err    *imv2.PacketError
}

func newToolReplays(c clock.Clock) *toolReplays {
	return &toolReplays{clock: c, calls: map[toolKey]*toolCall{}, peers: map[string]int{}}
}

// callSum identifies a call's content: the tool and its arguments as sent.
func callSum(toolID string, args json.RawMessage) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(toolID))
	h.Write([]byte{0})
	h.Write(args)
	var s [sha256.Size]byte
	h.Sum(s[:0])
	return s
}

// begin records a call of peer on channel under requestID. It returns the
// recorded call and first = false when the same call is recorded already
// (a replay: wait for its done and send its answer), else the new record
// and first = true (run it, then finish). A call it cannot key (no
// request_id, or a request_id reused for another call) is run unrecorded:
// c = nil, first = true.
func (r *toolReplays) begin(peer, channel, requestID string, sum [sha256.Size]byte) (c *toolCall, first bool) {
	if requestID == "" {
		return nil, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	r.expireLocked(now)
	key := toolKey{channel, requestID}
	if old := r.calls[key]; old != nil {
		if old.sum == sum {
			return old, false
		}
		return nil, true
	}
	if r.peers[peer] >= toolReplaysPerPeer {
		for e := r.order.Front(); e != nil; e = e.Next() {
			if o := e.Value.(*toolCall); o.peer == peer {
				r.removeLocked(o)
				break
			}
		}
	}
	if r.order.Len() >= toolReplaysTotal {
		r.evictLocked(peer)
	}
	c = &toolCall{key: key, peer: peer, sum: sum, began: now, done: make(chan struct{})}
	c.elem = r.order.PushBack(c)
	r.calls[key] = c
	r.peers[peer]++
	return c, true
}

// finish stores c's answer and wakes its replays. c may be nil (a call
// run unrecorded).
func (r *toolReplays) finish(c *toolCall, ans toolAnswer) {
	if c == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c.ans = ans
	close(c.done)
	if r.calls[c.key] != c { // evicted while it ran: its waiters still get the answer
		return
	}
	c.size = len(ans.result) + len(ans.toolID)
	if ans.err != nil {
		c.size += len(ans.err.Message) + len(ans.err.Code)
	}
	r.bytes += c.size
	for r.bytes > toolReplayBytes && r.order.Len() > 0 {
		r.evictLocked(c.peer)
	}
}

// abandon wakes c's replays with ans and forgets c, so a later replay runs
// the call: ans says it did not run (its record could not be written).
func (r *toolReplays) abandon(c *toolCall, ans toolAnswer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.ans = ans
	close(c.done)
	if r.calls[c.key] == c {
		r.removeLocked(c)
	}
}

// evictLocked removes the oldest call of the connector_id holding the
// most calls (ties: the recording peer's own first, then the oldest
// call's peer), so one peer's flood cannot push out another's answers.
func (r *toolReplays) evictLocked(recording string) {
	top := recording
	for p, n := range r.peers {
		if n > r.peers[top] {
			top = p
		}
	}
	if r.peers[top] == 0 {
		return
	}
	for e := r.order.Front(); e != nil; e = e.Next() {
		if o := e.Value.(*toolCall); o.peer == top {
			r.removeLocked(o)
			return
		}
	}
}

// expireLocked drops the calls older than toolReplayTTL.
func (r *toolReplays) expireLocked(now time.Time) {
	for e := r.order.Front(); e != nil; e = r.order.Front() {
		c := e.Value.(*toolCall)
		if now.Sub(c.began) < toolReplayTTL {
			return
		}
		r.removeLocked(c)
	}
}

func (r *toolReplays) removeLocked(c *toolCall) {
	r.order.Remove(c.elem)
	delete(r.calls, c.key)
	if r.peers[c.peer]--; r.peers[c.peer] <= 0 {
		delete(r.peers, c.peer)
	}
	r.bytes -= c.size
}

// len returns the calls kept, for tests.
func (r *toolReplays) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.order.Len()
}

// toolRecordID is the completed-store message ID of the durable record of
// the call with requestID: a fixed-size digest, so any request_id fits
// the stores' ID bounds.
func toolRecordID(requestID string) string {
	h := sha256.Sum256([]byte(requestID))
	return "w13_tool_" + hex.EncodeToString(h[:16])
}

// toolOutcomeID is the completed-store message ID of the record of how
// the call with requestID ended (toolDone).
func toolOutcomeID(requestID string) string { return toolRecordID(requestID) + "_done" }

// Outcomes a call's second record holds in its fingerprint's first byte.
// A success's second byte says whether its result is kept with the
// record (toolResultKept: an state.ResultStore, a result of at most
// state.MaxResultBytes); a failure's code follows (its length, then at
// most 30 bytes).
const (
	toolSucceeded  = 1
	toolFailed     = 2
	toolResultKept = 1
)

// toolDone writes how a recorded call ended: succeeded, with its result
// when the store keeps results (state.ResultStore) and it fits
// state.MaxResultBytes, or failed with its code, so a replay after a
// restart gets the same answer or says how the call ended
// (toolRanBefore). A store error is logged by the caller; the replay then
// says the outcome is unknown.
func (s *Server) toolDone(ctx context.Context, peer, channel, requestID string, ans toolAnswer) error {
	ctx = connid.WithConnectorID(context.WithoutCancel(ctx), peer)
	ctx, cancel := context.WithTimeout(ctx, openStoreTimeout)
	defer cancel()
	var fp imv2.Fingerprint
	fp[0] = toolSucceeded
	if ans.err != nil {
		fp[0] = toolFailed
		if len(ans.err.Code) <= len(fp)-2 { // a longer code is not kept: no cut code
			fp[1] = byte(copy(fp[2:], ans.err.Code))
		}
	} else if rs, ok := s.opts.Completed.(state.ResultStore); ok && len(ans.result) <= state.MaxResultBytes {
		fp[1] = toolResultKept
		return rs.RecordResult(ctx, channel, toolOutcomeID(requestID), fp, ans.result)
	}
	return s.opts.Completed.Record(ctx, channel, toolOutcomeID(requestID), fp)
}

// toolRanBefore answers a replay of a call whose durable record outlived
// its answer in memory (a restart, or a flood of calls): the call is not
// run again. A success whose result was kept gets that result; otherwise
// the answer says how the call ended, as far as the store knows: a
// failure keeps its code; a success whose result was not kept (over
// state.MaxResultBytes, or a store that keeps none) or an unknown end is
// tool_invoke_failed saying so.
func (s *Server) toolRanBefore(ctx context.Context, peer, channel, requestID, toolID string) (json.RawMessage, error) {
	ctx = connid.WithConnectorID(ctx, peer)
	ctx, cancel := context.WithTimeout(ctx, openStoreTimeout)
	defer cancel()
	var (
		fp     imv2.Fingerprint
		result []byte
		ok     bool
		err    error
	)
	if rs, isRS := s.opts.Completed.(state.ResultStore); isRS {
		fp, result, ok, err = rs.LookupResult(ctx, channel, toolOutcomeID(requestID))
	} else {
		fp, ok, err = s.opts.Completed.Lookup(ctx, channel, toolOutcomeID(requestID))
	}
	switch {
	case err == nil && ok && fp[0] == toolSucceeded && fp[1] == toolResultKept:
		return json.RawMessage(result), nil
	case err == nil && ok && fp[0] == toolSucceeded:
		return nil, imv2.Errorf(protocol.CodeToolInvokeFailed, "tool.invoke of %q with this request_id ran before (W13) and succeeded; its result was not kept (over %d bytes, or a store that keeps none), and the call is not run again", toolID, state.MaxResultBytes)
	case err == nil && ok && fp[0] == toolFailed && fp[1] > 0 && int(fp[1]) <= len(fp)-2:
		return nil, imv2.Errorf(imv2.Code(fp[2:2+fp[1]]), "tool.invoke of %q with this request_id ran before (W13) and failed with this code; it is not run again", toolID)
	case err == nil && ok && fp[0] == toolFailed:
		return nil, imv2.Errorf(protocol.CodeToolInvokeFailed, "tool.invoke of %q with this request_id ran before (W13) and failed; it is not run again", toolID)
	}
	return nil, imv2.Errorf(protocol.CodeToolInvokeFailed, "tool.invoke of %q with this request_id began before a restart (W13) and how it ended is unknown; it is not run again", toolID)
}

// toolRan writes the durable record of a call of peer on channel under
// requestID before it runs, and reports whether the record was there
// already with the same content: the call ran (or began) before, and must
// not run again. A record with other content is a request_id reused for
// another call: run, as in memory, and leave the record. A store error is
// returned; the call is then not run.
func (s *Server) toolRan(ctx context.Context, peer, channel, requestID string, sum [sha256.Size]byte) (bool, error) {
	ctx = connid.WithConnectorID(ctx, peer) // the store's share is the peer's
	ctx, cancel := context.WithTimeout(ctx, openStoreTimeout)
	defer cancel()
	id := toolRecordID(requestID)
	fp, ok, err := s.opts.Completed.Lookup(ctx, channel, id)
	if err != nil {
		return false, err
	}
	if ok {
		return fp == imv2.Fingerprint(sum), nil
	}
	return false, s.opts.Completed.Record(ctx, channel, id, imv2.Fingerprint(sum))
}
