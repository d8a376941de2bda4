package connector

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/internal/port"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// unitCard is a valid Card; flows adds a sign-in form.
func unitCard(flows bool) *protocol.Card {
	c := &protocol.Card{
		Schema: protocol.CardSchema, ProtocolVersion: protocol.ProtocolVersion, ConnectorCardID: "im.unit",
		Build:     protocol.Build{Version: "1.0.0", BuildTime: "2026-12-01"},
		Connector: protocol.CardInfo{Name: "Unit", Version: "1.0.0"},
		Supports: protocol.Supports{TargetTypes: []string{imv2.TargetTypeIM}, Profiles: []string{imv2.ProfileIMv2},
			Targets: []protocol.SupportedTarget{{TargetType: imv2.TargetTypeIM, Provider: "unit", Label: "Unit"}}},
	}
	if flows {
		c.AuthFlows = []protocol.AuthFlow{{ID: "bot", Type: "form", TargetType: imv2.TargetTypeIM, Title: "Bot",
			Fields: []protocol.AuthField{{Name: "chat_id", Label: "Chat", InputType: "text", Required: true}}}}
	}
	return c
}

// editor is a plain Editor (no Finisher) that logs its calls.
type editor struct {
	mu    sync.Mutex
	calls []string
}

func (e *editor) log(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, s)
}

func (e *editor) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

func (e *editor) Post(_ context.Context, to Conversation, m *Message) error {
	e.log("post " + to.Key + " " + m.Text + " files=" + string(rune('0'+len(m.Files))))
	return nil
}

func (e *editor) PostDraft(_ context.Context, _ Conversation, id, text string) (string, error) {
	e.log("draft " + text)
	return "h-" + id, nil
}

func (e *editor) Edit(_ context.Context, _ Conversation, h, text string) error {
	e.log("edit " + h + " " + text)
	return nil
}

func (e *editor) Typing(_ context.Context, to Conversation, a imv2.ChatActivity) error {
	e.log("typing " + string(a.Status) + " " + a.ToolName)
	return nil
}

func (e *editor) Released(_ context.Context, key string) error {
	e.log("release " + key)
	return nil
}

// newUnit is a Connector on p with a fake clock; without flows, ch_1 and
// ch_2 are bound to the default conversation.
func newUnit(t *testing.T, p Platform, flows bool, o Options) (*Connector, *fakeclock.Clock) {
	t.Helper()
	clock := fakeclock.New(time.Unix(1_790_000_000, 0))
	o.Advanced.Clock = clock
	k, err := New(unitCard(flows), p, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	if !flows {
		// ch_1 and ch_2 stand for channels the Server issued: bound to
		// the default conversation once, as OnChannelCreate does.
		for _, ch := range []string{"ch_1", "ch_2"} {
			if err := k.created(context.Background(), ch); err != nil {
				t.Fatal(err)
			}
		}
	}
	return k, clock
}

// fatalOn returns a func that ends t on a non-nil error.
func fatalOn(t *testing.T) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestKit_M11_FinalEditSkippedWhenTheLastEditShowsIt: on a plain Editor
// the final is an edit of the temporary message, skipped when the last
// coalesced edit already shows exactly the final text; a final with other
// text edits once, and its files are posted beside it.
func TestKit_M11_FinalEditSkippedWhenTheLastEditShowsIt(t *testing.T) {
	e := &editor{}
	k, clock := newUnit(t, e, false, Options{Advanced: Advanced{Display: Display{Interval: time.Second}}})
	if k.Mode() != ModeEdit {
		t.Fatalf("mode %v; want edit for an Editor", k.Mode())
	}
	ctx := context.Background()
	tg := k.display
	must := fatalOn(t)
	must(tg.UpdateDraft(ctx, "ch_1", "m1", "Hel"))
	must(tg.UpdateDraft(ctx, "ch_1", "m1", "Hell")) // coalesced
	must(tg.UpdateDraft(ctx, "ch_1", "m1", "Hello"))
	clock.Advance(time.Second) // the coalesced edit shows the newest text
	must(tg.PostMessage(ctx, "ch_1", &imv2.ChatMessage{MessageID: "m1", Text: "Hello"}))
	want := []string{"draft Hel", "edit h-m1 Hello"}
	if got := e.got(); !slices.Equal(got, want) {
		t.Fatalf("calls %q; want %q (no final edit: it would show nothing new)", got, want)
	}

	must(tg.UpdateDraft(ctx, "ch_1", "m2", "Hi"))
	ref, err := k.handler.Files().Put(ctx, "ch_1", "a.txt", "text/plain", strings.NewReader("x"))
	must(err)
	must(tg.PostMessage(ctx, "ch_1", &imv2.ChatMessage{MessageID: "m2", Text: "Hi there",
		Files: []imv2.File{{Type: imv2.FileFile, FileRef: ref.FileRef, Filename: "a.txt"}}}))
	want = append(want, "draft Hi", "edit h-m2 Hi there", "post default  files=1")
	if got := e.got(); !slices.Equal(got, want) {
		t.Fatalf("calls %q; want %q", got, want)
	}
}

// TestKit_M11_FinalEditSkipIsPerChannel: two conversations may number
// their messages alike (Telegram's message_id, Slack's ts are per chat),
// so what a handle shows is kept per channel: ch_1's final edits its own
// draft even though ch_2's draft, under the same handle, shows the final
// text already. With one map for every channel the edit was skipped and
// ch_1 showed "Ye" under an accepted final.
func TestKit_M11_FinalEditSkipIsPerChannel(t *testing.T) {
	e := &perChatEditor{}
	k, _ := newUnit(t, e, false, Options{Advanced: Advanced{Display: Display{Interval: time.Second}}})
	ctx := context.Background()
	tg := k.display
	must := fatalOn(t)
	must(tg.UpdateDraft(ctx, "ch_1", "m1", "Ye"))
	must(tg.UpdateDraft(ctx, "ch_2", "m2", "Yes."))
	must(tg.PostMessage(ctx, "ch_1", &imv2.ChatMessage{MessageID: "m1", Text: "Yes."}))
	must(tg.PostMessage(ctx, "ch_2", &imv2.ChatMessage{MessageID: "m2", Text: "Yes. Done."}))
	want := []string{"draft Ye", "draft Yes.", "edit 1 Yes.", "edit 1 Yes. Done."}
	if got := e.got(); !slices.Equal(got, want) {
		t.Fatalf("calls %q; want %q", got, want)
	}
}

// perChatEditor is an editor whose every draft is message "1" of its
// chat, as the first message of each of two chats would be.
type perChatEditor struct{ editor }

func (e *perChatEditor) PostDraft(_ context.Context, _ Conversation, _, text string) (string, error) {
	e.log("draft " + text)
	return "1", nil
}

// TestKit_StartAfterCloseFails: Start on a closed Connector fails with
// ErrClosed; it used to return a URL that nothing answered.
func TestKit_StartAfterCloseFails(t *testing.T) {
	k, _ := newUnit(t, &editor{}, false, Options{})
	k.Close()
	if url, err := k.Start("127.0.0.1:0"); !errors.Is(err, imv2.ErrClosed) {
		t.Fatalf("Start after Close: %q, %v; want ErrClosed", url, err)
	}
}

// TestKit_C5_TypingGetsStatusAndToolName: the Typer sees thinking, then
// the tool with its name as soon as it changes, then the clear.
func TestKit_C5_TypingGetsStatusAndToolName(t *testing.T) {
	e := &editor{}
	k, _ := newUnit(t, e, false, Options{})
	tg := k.display
	ctx := context.Background()
	for _, a := range []imv2.ChatActivity{
		{Status: imv2.ActivityThinking},
		{Status: imv2.ActivityThinking}, // the same again: display refreshes it on its timer
		{Status: imv2.ActivityTool, ToolName: "web_search"},
		{Status: imv2.ActivityIdle},
	} {
		if err := tg.SetActivity(ctx, "ch_1", a); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"typing thinking ", "typing tool web_search", "typing idle "}
	if got := e.got(); !slices.Equal(got, want) {
		t.Fatalf("Typer calls %q; want %q", got, want)
	}
}

// TestKit_W7_DescriptorFollowsBindingAndReleaseIsCounted: with sign-in
// flows a channel is created until bound, connected while bound, expired
// after Expire; the conversation is released once, with its last binding.
func TestKit_W7_DescriptorFollowsBindingAndReleaseIsCounted(t *testing.T) {
	e := &editor{}
	k, _ := newUnit(t, e, true, Options{})
	ctx := context.Background()
	status := func(ch string) string { return k.describe(ctx, ch).Status }
	if s := status("ch_1"); s != protocol.StatusCreated {
		t.Fatalf("unbound channel is %q; want created", s)
	}
	if err := k.Receive(ctx, InboundEvent{Conversation: "room", EventID: "1", Text: "x"}); !errors.Is(err, ErrNotBound) {
		t.Fatalf("Receive for an unbound conversation = %v; want ErrNotBound", err)
	}
	for _, ch := range []string{"ch_1", "ch_2"} {
		if err := k.Bind(ctx, state.Binding{ChannelID: ch, Key: "room"}); err != nil {
			t.Fatal(err)
		}
	}
	if s := status("ch_1"); s != protocol.StatusConnected {
		t.Fatalf("bound channel is %q; want connected", s)
	}
	if err := k.Expire(ctx, "ch_2"); err != nil {
		t.Fatal(err)
	}
	if s := status("ch_2"); s != protocol.StatusExpired {
		t.Fatalf("expired channel is %q; want expired", s)
	}
	if _, err := k.conversation(ctx, "ch_2"); err == nil || imv2.SafeToRetry(err) {
		t.Fatalf("a final to an expired binding: %v; want a permanent refusal", err)
	}
	if err := k.Unbind(ctx, "ch_1"); err != nil {
		t.Fatal(err)
	}
	if got := e.got(); len(got) != 0 {
		t.Fatalf("released while ch_2 is still bound: %q", got)
	}
	k.dropped("ch_2") // the offline grace ran out
	if got, want := e.got(), []string{"release room"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q; want %q", got, want)
	}
	if s := status("ch_1"); s != protocol.StatusCreated {
		t.Fatalf("unbound channel is %q; want created", s)
	}
}

// signInPlatform signs in by the chat_id field of the form.
type signInPlatform struct{ *editor }

func (s *signInPlatform) Start(_ context.Context, _ string, req protocol.AuthStart) (SignInResult, error) {
	if req.Input["chat_id"] == "" {
		return SignInResult{}, imv2.Errorf(imv2.CodeInvalidPacket, "chat_id required")
	}
	return SignInResult{Bind: &state.Binding{Key: req.Input["chat_id"], Target: protocol.DescriptorTarget{DisplayName: "Room"}}}, nil
}

func (s *signInPlatform) Status(context.Context, string, protocol.AuthStatusRequest) (SignInResult, error) {
	return SignInResult{Ack: &protocol.AuthAck{Status: protocol.AuthPending}}, nil
}

func (s *signInPlatform) Cancel(context.Context, string, protocol.AuthCancel) (*protocol.AuthCancelAck, error) {
	return &protocol.AuthCancelAck{Status: "canceled"}, nil
}

// TestKit_W12_SignInBindsAndLogoutReleases: auth.start's result binds the
// channel before the ack (authenticated), auth.logout unbinds and releases.
func TestKit_W12_SignInBindsAndLogoutReleases(t *testing.T) {
	s := &signInPlatform{&editor{}}
	k, _ := newUnit(t, s, true, Options{})
	ctx := context.Background()
	ah := authHandler{k, s}
	ack, err := ah.Start(ctx, "ch_1", protocol.AuthStart{FlowID: "bot", Input: map[string]string{"chat_id": "-100"}})
	if err != nil || ack.Status != protocol.AuthAuthenticated {
		t.Fatalf("Start = %+v, %v; want authenticated", ack, err)
	}
	info := k.describe(ctx, "ch_1")
	if info.Status != protocol.StatusConnected || info.DisplayName != "Room" {
		t.Fatalf("Descriptor info %+v; want connected, Room", info)
	}
	if _, err := ah.Start(ctx, "ch_1", protocol.AuthStart{FlowID: "bot", Input: map[string]string{"chat_id": "-200"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ah.Logout(ctx, "ch_1"); err != nil {
		t.Fatal(err)
	}
	// Signing in to another chat released the first; logout the second.
	if got, want := s.got(), []string{"release -100", "release -200"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q; want %q", got, want)
	}
	if st := k.describe(ctx, "ch_1").Status; st != protocol.StatusCreated {
		t.Fatalf("after logout %q; want created", st)
	}
}

func TestKit_InvalidInputRefused(t *testing.T) {
	if _, err := New(unitCard(false), &editor{}, &Options{Mode: ModeStream}); err == nil {
		t.Fatal("mode stream accepted for a platform without Draft")
	}
	if _, err := New(unitCard(false), nil, nil); err == nil {
		t.Fatal("a nil Platform accepted")
	}
	k, _ := newUnit(t, &editor{}, false, Options{})
	if err := k.Receive(context.Background(), InboundEvent{Conversation: "default"}); err == nil {
		t.Fatal("an event without an EventID accepted")
	}
}

// idem is a Platform that deduplicates by key and can be asked.
type idem struct {
	*editor
	asked []string
}

func (idem) PostsIdempotently() bool { return true }
func (i *idem) WasPosted(_ context.Context, to Conversation, key string) (bool, error) {
	i.asked = append(i.asked, to.Key+" "+key)
	return true, nil
}

// TestKit_S8_DedupCapabilitiesPassThrough: the platform's answers reach
// the Channel (through the Target every Channel gets) as
// port.IdempotentTarget and port.PostCheckTarget, asked with the channel's
// conversation; a platform without them says so.
func TestKit_S8_DedupCapabilitiesPassThrough(t *testing.T) {
	p := &idem{editor: &editor{}}
	k, _ := newUnit(t, p, false, Options{})
	var tg imv2.Target = drainTarget{k.display, k}
	it, ok := tg.(port.IdempotentTarget)
	if !ok || !it.PostsIdempotently() {
		t.Fatal("an idempotent platform is not reported idempotent")
	}
	posted, err := tg.(port.PostCheckTarget).WasPosted(context.Background(), "ch_1", "key-1")
	if err != nil || !posted || !slices.Equal(p.asked, []string{"default key-1"}) {
		t.Fatalf("WasPosted = %v, %v, asked %q", posted, err, p.asked)
	}
	plain, _ := newUnit(t, &editor{}, false, Options{})
	tg = drainTarget{plain.display, plain}
	if tg.(port.IdempotentTarget).PostsIdempotently() {
		t.Fatal("a plain platform is reported idempotent")
	}
	if _, err := tg.(port.PostCheckTarget).WasPosted(context.Background(), "ch_1", "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("WasPosted on a plain platform = %v; want ErrUnsupported", err)
	}
}

// unbinder is an editor told of every binding that went.
type unbinder struct{ *editor }

func (u unbinder) Unbound(_ context.Context, b state.Binding) error {
	u.log("unbound " + b.ChannelID + " " + b.Key)
	return nil
}

// TestKit_Unbinder_ToldPerChannelBeforeRelease: every binding that goes
// (logout, drop) reaches Unbound, one call per channel, and the key's
// Released comes after the last one's.
func TestKit_Unbinder_ToldPerChannelBeforeRelease(t *testing.T) {
	u := unbinder{&editor{}}
	k, _ := newUnit(t, u, true, Options{})
	ctx := context.Background()
	for _, ch := range []string{"ch_1", "ch_2"} {
		if err := k.Bind(ctx, state.Binding{ChannelID: ch, Key: "room"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Unbind(ctx, "ch_1"); err != nil {
		t.Fatal(err)
	}
	k.dropped("ch_2")
	if err := k.Unbind(ctx, "ch_2"); err != nil { // unbound already: no call
		t.Fatal(err)
	}
	want := []string{"unbound ch_1 room", "unbound ch_2 room", "release room"}
	if got := u.got(); !slices.Equal(got, want) {
		t.Fatalf("calls %q; want %q", got, want)
	}
}

// filesRefused is an editor whose platform refuses every post with files.
type filesRefused struct{ editor }

func (e *filesRefused) Post(ctx context.Context, to Conversation, m *Message) error {
	if len(m.Files) > 0 {
		e.log("post refused")
		return imv2.Refused(errors.New("files refused"))
	}
	return e.editor.Post(ctx, to, m)
}

// TestKit_M11_FinalFilesFailAfterTextShownIsRetryable: on a plain Editor
// whose file post fails after the final text was edited in, the final is
// rejected retryable (the text is on screen; a resend posts the files) and
// the handle is forgotten, so the shown map does not grow.
func TestKit_M11_FinalFilesFailAfterTextShownIsRetryable(t *testing.T) {
	e := &filesRefused{}
	k, _ := newUnit(t, e, false, Options{Advanced: Advanced{Display: Display{Interval: time.Second}}})
	ctx := context.Background()
	if err := k.display.UpdateDraft(ctx, "ch_1", "m1", "Hi"); err != nil {
		t.Fatal(err)
	}
	ref, err := k.handler.Files().Put(ctx, "ch_1", "a.txt", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	err = k.display.PostMessage(ctx, "ch_1", &imv2.ChatMessage{MessageID: "m1", Text: "Hi there",
		Files: []imv2.File{{Type: imv2.FileFile, FileRef: ref.FileRef, Filename: "a.txt"}}})
	if err == nil || !imv2.SafeToRetry(err) {
		t.Fatalf("final with refused files = %v; want a retryable error", err)
	}
	if got, want := e.got(), []string{"draft Hi", "edit h-m1 Hi there", "post refused"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q; want %q", got, want)
	}
	k.out.mu.Lock()
	n := len(k.out.shown)
	k.out.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d handles still recorded as shown after the final; want 0", n)
	}
}
