package connector

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
)

// once is a chat service whose first post fails with err (shown first
// when shown is set: a lost response) and whose later posts succeed.
type once struct {
	err   error
	shown bool

	mu    sync.Mutex
	posts int
	seen  int // posts on screen
}

func (p *once) Post(context.Context, Conversation, *Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts++
	if p.posts == 1 {
		if p.shown {
			p.seen++
		}
		return p.err
	}
	p.seen++
	return nil
}

// TestKit_A8_S8_ErrorContract checks every row of Platform's error table
// on a final's post: what the kit answers and how often it posts.
func TestKit_A8_S8_ErrorContract(t *testing.T) {
	cause := errors.New("platform said no")
	for _, tc := range []struct {
		name     string
		err      error
		shown    bool // the failed post was applied anyway
		posts    int
		wantCode imv2.Code // "" accepted; "-" rejected for good, no code of the kit's
	}{
		{name: "nil: applied", posts: 1},
		{name: "Permanent: never again", err: imv2.Refused(cause), posts: 1, wantCode: "-"},
		{name: "Retryable: not posted, made again", err: imv2.NotPosted(cause), posts: 2},
		{name: "retryable *Error: not posted, made again", err: &imv2.Error{Code: imv2.CodeTargetDeliveryFailed, Retryable: true}, posts: 2},
		{name: "RetryAfter: not posted, made again after d", err: imv2.RetryAfter(cause, 3*time.Second), posts: 2},
		{name: "dial error: never left, made again", err: &net.OpError{Op: "dial", Net: "tcp", Err: cause}, posts: 2},
		{name: "plain: maybe posted, never made again", err: cause, shown: true, posts: 1, wantCode: imv2.CodeDeliveryOutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &once{err: tc.err, shown: tc.shown}
			k, clock := newUnit(t, p, false, Options{})
			if tc.err == nil {
				p.posts = 1 // the first post succeeds
				p.seen = 0
			}
			err := unitChannel(t, k, clock)("m1")
			p.mu.Lock()
			posts, seen := p.posts, p.seen
			p.mu.Unlock()
			if tc.err == nil {
				posts--
			}
			wantSeen := 1
			if tc.wantCode == "-" {
				wantSeen = 0
			}
			if posts != tc.posts || seen != wantSeen {
				t.Errorf("%d posts, shown %d times; want %d posts, shown %d", posts, seen, tc.posts, wantSeen)
			}
			var e *imv2.Error
			switch {
			case tc.wantCode == "" && err != nil:
				t.Errorf("final = %v; want accepted", err)
			case tc.wantCode == "-" && (err == nil || imv2.SafeToRetry(err)):
				t.Errorf("final = %v; want rejected, retryable=false", err)
			case tc.wantCode != "" && tc.wantCode != "-" && (!errors.As(err, &e) || e.Code != tc.wantCode || imv2.SafeToRetry(err)):
				t.Errorf("final = %v; want %s, retryable=false", err, tc.wantCode)
			}
		})
	}
}
