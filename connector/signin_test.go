package connector

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/fakeclock"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// formSignIn has Start only: its form flow finishes within auth.start.
type formSignIn struct{ *editor }

func (formSignIn) Start(_ context.Context, _ string, req protocol.AuthStart) (SignInResult, error) {
	return SignInResult{Bind: &state.Binding{Key: req.Input["chat_id"]}}, nil
}

// TestKit_W12_StatusFromTheBindingWithoutSignInStatus: a SignIn without
// Status gets auth.status answered by the kit: auth_session_not_found
// before a sign-in (no session outlives Start, Common Protocol §8.9), then
// authenticated, expired, and not found again after logout.
func TestKit_W12_StatusFromTheBindingWithoutSignInStatus(t *testing.T) {
	p := formSignIn{&editor{}}
	k, _ := newUnit(t, p, true, Options{})
	ctx := context.Background()
	ah := authHandler{k, p}
	status := func() (protocol.AuthState, error) {
		ack, err := ah.Status(ctx, "ch_1", protocol.AuthStatusRequest{AuthSessionID: "auth_1"})
		if err != nil {
			return "", err
		}
		return ack.Status, nil
	}
	notFound := func(when string) {
		t.Helper()
		if _, err := status(); !errors.Is(err, &imv2.Error{Code: protocol.CodeAuthSessionNotFound}) {
			t.Fatalf("auth.status %s: %v; want auth_session_not_found", when, err)
		}
	}
	notFound("before a sign-in")
	if _, err := ah.Start(ctx, "ch_1", protocol.AuthStart{FlowID: "bot", Input: map[string]string{"chat_id": "-100"}}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		do   func() error
		want protocol.AuthState
	}{
		{func() error { return nil }, protocol.AuthAuthenticated},
		{func() error { return k.Expire(ctx, "ch_1") }, protocol.AuthExpired},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		if got, err := status(); err != nil || got != step.want {
			t.Fatalf("auth.status = %q, %v; want %q", got, err, step.want)
		}
	}
	if _, err := ah.Logout(ctx, "ch_1"); err != nil {
		t.Fatal(err)
	}
	notFound("after logout")
}

// TestKit_W12_CancelFromTheBindingWithoutSignInCanceler: auth.cancel of a
// SignIn without Cancel is not_found (unauthenticated) on an unbound
// channel; on a bound one it is ignored (Common Protocol §8.11: the
// finished sign-in is kept) with auth_status authenticated, and the binding stays.
func TestKit_W12_CancelFromTheBindingWithoutSignInCanceler(t *testing.T) {
	p := formSignIn{&editor{}}
	k, _ := newUnit(t, p, true, Options{})
	ctx := context.Background()
	ah := authHandler{k, p}
	ack, err := ah.Cancel(ctx, "ch_1", protocol.AuthCancel{AuthSessionID: "auth_1"})
	if err != nil || ack.Status != "not_found" || ack.AuthStatus != protocol.AuthUnauthenticated {
		t.Fatalf("cancel unbound = %+v, %v; want not_found, unauthenticated", ack, err)
	}
	if err := k.bind(ctx, state.Binding{ChannelID: "ch_1", Key: "-100"}); err != nil {
		t.Fatal(err)
	}
	// The channel is unknown to the data plane here: the Descriptor cannot
	// be had, which the ack says as an error rather than a wrong answer.
	if _, err := ah.Cancel(ctx, "ch_1", protocol.AuthCancel{}); !errors.Is(err, &imv2.Error{Code: protocol.CodeConnectionNotFound}) {
		t.Fatalf("cancel of a channel the Server does not know: %v; want connection_not_found", err)
	}
}

// canceler has its own Status and Cancel: the kit defers to them.
type canceler struct{ formSignIn }

func (canceler) Status(context.Context, string, protocol.AuthStatusRequest) (SignInResult, error) {
	return SignInResult{Ack: &protocol.AuthAck{Status: protocol.AuthScanned}}, nil
}

func (canceler) Cancel(context.Context, string, protocol.AuthCancel) (*protocol.AuthCancelAck, error) {
	return &protocol.AuthCancelAck{Status: "canceled"}, nil
}

func TestKit_W12_OwnStatusAndCancelAreUsed(t *testing.T) {
	p := canceler{formSignIn{&editor{}}}
	k, _ := newUnit(t, p, true, Options{})
	ah := authHandler{k, p}
	ack, err := ah.Status(context.Background(), "ch_1", protocol.AuthStatusRequest{AuthSessionID: "a"})
	if err != nil || ack.Status != protocol.AuthScanned {
		t.Fatalf("Status = %+v, %v; want the platform's scanned", ack, err)
	}
	cack, err := ah.Cancel(context.Background(), "ch_1", protocol.AuthCancel{AuthSessionID: "a"})
	if err != nil || cack.Status != "canceled" {
		t.Fatalf("Cancel = %+v, %v; want the platform's canceled", cack, err)
	}
}

// refusing refuses a wrong password with a reason, binds with Data
// otherwise, and is told of every binding that went.
type refusing struct {
	*editor
	posted chan Conversation
}

func (r refusing) Start(_ context.Context, _ string, req protocol.AuthStart) (SignInResult, error) {
	if req.Input["password"] != "right" {
		return SignInResult{}, &SignInError{Reason: "wrong password"}
	}
	return SignInResult{Bind: &state.Binding{Key: req.Input["chat_id"], Data: []byte("token-" + req.Input["chat_id"])}}, nil
}

func (r refusing) Unbound(_ context.Context, b state.Binding) error {
	r.log("unbound " + b.Key + " " + string(b.Data))
	return nil
}

func (r refusing) Post(_ context.Context, to Conversation, _ *Message) error {
	r.posted <- to
	return nil
}

// TestKit_W12_SignInErrorIsStatusFailed: a *SignInError of Start is
// answered status failed with its reason (no envelope error); every ack of
// Start carries an auth_session_id; signing in again tells the platform
// the replaced binding went; the platform posts with the binding's Data.
func TestKit_W12_SignInErrorIsStatusFailed(t *testing.T) {
	p := refusing{&editor{}, make(chan Conversation, 1)}
	k, _ := newUnit(t, p, true, Options{})
	ctx := context.Background()
	ah := authHandler{k, p}
	ack, err := ah.Start(ctx, "ch_1", protocol.AuthStart{FlowID: "bot", Input: map[string]string{"password": "wrong"}})
	if err != nil || ack.Status != protocol.AuthFailed || ack.Message != "wrong password" || ack.AuthSessionID == "" {
		t.Fatalf("Start = %+v, %v; want failed, the reason, a session ID", ack, err)
	}
	for _, chat := range []string{"-100", "-200"} {
		ack, err = ah.Start(ctx, "ch_1", protocol.AuthStart{FlowID: "bot", Input: map[string]string{"password": "right", "chat_id": chat}})
		if err != nil || ack.Status != protocol.AuthAuthenticated || ack.AuthSessionID == "" {
			t.Fatalf("Start = %+v, %v; want authenticated with a session ID", ack, err)
		}
	}
	if got, want := p.got(), []string{"unbound -100 token--100", "release -100"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q; want %q", got, want)
	}
	if err := k.display.PostMessage(ctx, "ch_1", &imv2.ChatMessage{MessageID: "m1", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if to := <-p.posted; to.Key != "-200" || string(to.Data) != "token--200" {
		t.Fatalf("posted to %+v; want -200 with its Data", to)
	}
}

// TestKit_W12_RefusedBindingIsToldToTheUnbinder: when the store cannot
// keep a sign-in's binding (full), auth.start fails and the platform is
// told the binding went, so it drops the credentials it made for it.
func TestKit_W12_RefusedBindingIsToldToTheUnbinder(t *testing.T) {
	p := refusing{&editor{}, make(chan Conversation, 1)}
	clk := fakeclock.New(time.Unix(1_790_000_000, 0))
	st := newMemoryStore(clk)
	st.MemoryBindingStore = state.NewMemoryBindingStore(1)
	k, _ := newUnit(t, p, true, Options{Store: st})
	ctx := context.Background()
	ah := authHandler{k, p}
	in := func(chat string) protocol.AuthStart {
		return protocol.AuthStart{FlowID: "bot", Input: map[string]string{"password": "right", "chat_id": chat}}
	}
	if _, err := ah.Start(ctx, "ch_1", in("-100")); err != nil {
		t.Fatal(err)
	}
	if _, err := ah.Start(ctx, "ch_2", in("-200")); err == nil {
		t.Fatal("a binding beyond the store's cap was accepted")
	}
	if got, want := p.got(), []string{"unbound -200 token--200"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q; want %q", got, want)
	}
}
