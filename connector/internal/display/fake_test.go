package display_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector/internal/display"
	"github.com/xagentkit/imv2/fakeclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// call is one platform call a rec saw.
type call struct {
	Op        string // send, post, edit, finish, draft, discard, typing
	Channel   string
	MessageID string
	Handle    string
	Text      string
	Suffix    string
	Reset     bool
	On        bool   // typing: shown (thinking or tool), not cleared
	Status    string // typing: the activity's status and tool name
	Tool      string
	Files     int
	At        time.Duration // fake time since t0
}

// rec is a platform that records its calls. noTyping and noDiscard make
// it answer as the kit's adapter does for an author's platform without a
// Typer (nil, no call) or without a Discarder (errors.ErrUnsupported).
type rec struct {
	clk *fakeclock.Clock

	mu    sync.Mutex
	calls []call
	errs  map[string][]error // per op, consumed in order; the last one sticks
	n     int

	noTyping, noDiscard bool
	onCall              func(call) // if set, sees every call after it is recorded
}

func newRec(clk *fakeclock.Clock) *rec { return &rec{clk: clk, errs: map[string][]error{}} }

// fail makes the next calls of op return errs in order, the last one for good
// (nil ends the failures).
func (r *rec) fail(op string, errs ...error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs[op] = errs
}

func (r *rec) add(c call) error {
	if r.clk != nil {
		c.At = r.clk.Now().Sub(t0)
	}
	if r.onCall != nil {
		defer r.onCall(c)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	errs := r.errs[c.Op]
	if len(errs) == 0 {
		return nil
	}
	err := errs[0]
	if len(errs) > 1 {
		r.errs[c.Op] = errs[1:]
	}
	return err
}

func (r *rec) Post(_ context.Context, ch string, m *imv2.ChatMessage) error {
	return r.add(call{Op: "send", Channel: ch, MessageID: m.MessageID, Text: m.Text, Files: len(m.Files)})
}

func (r *rec) PostDraft(_ context.Context, ch, id, text string) (string, error) {
	r.mu.Lock()
	r.n++
	h := fmt.Sprintf("h%d", r.n)
	r.mu.Unlock()
	if err := r.add(call{Op: "post", Channel: ch, MessageID: id, Handle: h, Text: text}); err != nil {
		return "", err
	}
	return h, nil
}

func (r *rec) Edit(_ context.Context, ch, h, text string) error {
	return r.add(call{Op: "edit", Channel: ch, Handle: h, Text: text})
}

func (r *rec) Finish(_ context.Context, ch, h string, m *imv2.ChatMessage) error {
	return r.add(call{Op: "finish", Channel: ch, MessageID: m.MessageID, Handle: h, Text: m.Text, Files: len(m.Files)})
}

func (r *rec) Draft(_ context.Context, ch string, d display.Draft) (string, error) {
	h := d.Handle
	if h == "" {
		h = "s-" + d.MessageID
	}
	if err := r.add(call{Op: "draft", Channel: ch, MessageID: d.MessageID, Handle: d.Handle, Text: d.Text, Suffix: d.Suffix, Reset: d.Reset}); err != nil {
		return "", err
	}
	return h, nil
}

func (r *rec) Discard(_ context.Context, ch, h string) error {
	if r.noDiscard {
		return fmt.Errorf("rec: cannot remove a draft: %w", errors.ErrUnsupported)
	}
	return r.add(call{Op: "discard", Channel: ch, Handle: h})
}

func (r *rec) Typing(_ context.Context, ch string, a imv2.ChatActivity) error {
	if r.noTyping {
		return nil
	}
	return r.add(call{Op: "typing", Channel: ch, On: a.Status != imv2.ActivityIdle, Status: string(a.Status), Tool: a.ToolName})
}

// all returns a copy of the calls, or only those of the given ops.
func (r *rec) all(ops ...string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []call
	for _, c := range r.calls {
		if len(ops) == 0 {
			out = append(out, c)
			continue
		}
		for _, op := range ops {
			if c.Op == op {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

func (r *rec) count(ops ...string) int { return len(r.all(ops...)) }

var modeName = map[display.Mode]string{display.Stream: "stream", display.Edit: "edit", display.Buffer: "buffer"}

// caps is a platform's mode and what it can do beside it.
type caps struct {
	mode            display.Mode
	typing, discard bool
}

// newTarget builds a Target of c on a fresh fake clock and closes it at the
// end, checking that Close left no timer behind.
func newTarget(t *testing.T, c caps, opts display.Options) (*display.Target, *rec, *fakeclock.Clock) {
	t.Helper()
	clk := fakeclock.New(t0)
	r := newRec(clk)
	r.noTyping, r.noDiscard = !c.typing, !c.discard
	opts.Clock, opts.Mode = clk, c.mode
	tg, err := display.New(r, &opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, tg.Close())
		require.Zero(t, clk.Pending(), "timers left after Close")
	})
	return tg, r, clk
}

func msg(id, text string, files int) *imv2.ChatMessage {
	m := &imv2.ChatMessage{MessageID: id, Text: text}
	for i := range files {
		m.Files = append(m.Files, imv2.File{Type: imv2.FileFile, FileRef: fmt.Sprintf("fref_%d", i)})
	}
	return m
}

// requireDraft checks UpdateDraft's answer: nil, or in mode Buffer, which
// shows no drafts, an error matching errors.ErrUnsupported.
func requireDraft(t *testing.T, tg *display.Target, err error) {
	t.Helper()
	if tg.Mode() == display.Buffer {
		require.ErrorIs(t, err, errors.ErrUnsupported)
		return
	}
	require.NoError(t, err)
}
