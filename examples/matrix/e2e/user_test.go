//go:build unix

package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// waitTimeout bounds every wait on the homeserver or the Connector. Waits
// end as soon as their condition holds; the bound only turns a hang into a
// failure.
const waitTimeout = 20 * time.Second

// user is a person in the room: a Matrix client whose /sync the test reads
// to see what the Connector did.
type user struct {
	t     *testing.T
	cli   *mautrix.Client
	room  id.RoomID
	since string

	timeline []*event.Event // m.room.message events of the room, in order
	typing   [][]id.UserID  // every m.typing snapshot seen, in order
}

func newUser(t *testing.T, hs, userID, token string) *user {
	t.Helper()
	cli, err := mautrix.NewClient(hs, id.UserID(userID), token)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	cli.Client = &http.Client{Timeout: 30 * time.Second, Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	return &user{t: t, cli: cli}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// createRoom creates a public room and starts watching it.
func (u *user) createRoom() id.RoomID {
	u.t.Helper()
	resp, err := u.cli.CreateRoom(ctxFor(u.t), &mautrix.ReqCreateRoom{Preset: "public_chat", Name: "imv2 e2e"})
	if err != nil {
		u.t.Fatal(err)
	}
	u.room = resp.RoomID
	u.sync(0) // position after the room's creation
	return u.room
}

// sync runs one /sync (long-polling up to timeout) and records the room's
// messages and typing snapshots.
func (u *user) sync(timeout time.Duration) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	resp, err := u.cli.FullSyncRequest(ctx, mautrix.ReqSync{Timeout: int(timeout.Milliseconds()), Since: u.since})
	if err != nil {
		u.t.Fatalf("sync: %v", err)
	}
	u.since = resp.NextBatch
	jr := resp.Rooms.Join[u.room]
	if jr == nil {
		return
	}
	for _, evt := range jr.Timeline.Events {
		if evt.Type != event.EventMessage {
			continue
		}
		if err := evt.Content.ParseRaw(evt.Type); err != nil {
			u.t.Fatalf("event %s: %v", evt.ID, err)
		}
		u.timeline = append(u.timeline, evt)
	}
	for _, evt := range jr.Ephemeral.Events {
		if evt.Type != event.EphemeralEventTyping {
			continue
		}
		if err := evt.Content.ParseRaw(evt.Type); err != nil {
			u.t.Fatalf("typing: %v", err)
		}
		u.typing = append(u.typing, slices.Clone(evt.Content.AsTyping().UserIDs))
	}
}

// waitFor syncs until cond holds, failing after waitTimeout. It reads the
// homeserver's /sync; no timer of the SDK is waited on.
func (u *user) waitFor(what string, cond func() bool) {
	u.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			u.t.Fatalf("timed out waiting for %s", what)
		}
		u.sync(2 * time.Second)
	}
}

// say posts a text message.
func (u *user) say(text string) id.EventID {
	u.t.Helper()
	resp, err := u.cli.SendText(ctxFor(u.t), u.room, text)
	if err != nil {
		u.t.Fatal(err)
	}
	return resp.EventID
}

// messagesFrom returns the m.room.message events of sender seen so far.
func (u *user) messagesFrom(sender id.UserID) []*event.Event {
	var out []*event.Event
	for _, e := range u.timeline {
		if e.Sender == sender {
			out = append(out, e)
		}
	}
	return out
}

// isEdit reports whether e replaces another event, and which.
func isEdit(e *event.Event) (id.EventID, bool) {
	c := e.Content.AsMessage()
	if c.RelatesTo == nil {
		return "", false
	}
	target := c.RelatesTo.GetReplaceID()
	return target, target != ""
}

// shownBody is the body an edit-aware client shows for an event: the
// m.new_content of an edit, the body otherwise.
func shownBody(e *event.Event) string {
	c := e.Content.AsMessage()
	if c.NewContent != nil {
		return c.NewContent.Body
	}
	return c.Body
}
