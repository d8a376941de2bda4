package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/pgstore"
)

// TestRegistry_W5_S8_SharedAcrossReplicasAndForgetDropsState: a channel
// ID registered on one replica is known on another and after a restart,
// and Forget removes it with the channel's pending and completed state
// (S7).
func TestRegistry_W5_S8_SharedAcrossReplicasAndForgetDropsPendingKeepsCompleted(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	a := openStore(t, url, pgstore.Options{})
	b := openStore(t, url, pgstore.Options{})
	if known, err := b.Known(ctx, "cch_a"); err != nil || known {
		t.Fatalf("unregistered ID known: %v %v", known, err)
	}
	if err := a.Register(ctx, "cch_a"); err != nil {
		t.Fatal(err)
	}
	if err := a.Register(ctx, "cch_a"); err != nil {
		t.Fatalf("second Register: %v", err)
	}
	if err := a.Add(ctx, imv2.PendingEntry{ChannelID: "cch_a", Message: imv2.ChatMessage{MessageID: "m1", Text: "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(ctx, "cch_a", "m2", imv2.Fingerprint{1}); err != nil {
		t.Fatal(err)
	}
	if known, err := b.Known(ctx, "cch_a"); err != nil || !known {
		t.Fatalf("ID registered on replica a unknown on b: %v %v", known, err)
	}
	_ = a.Close()
	a = openStore(t, url, pgstore.Options{})
	if known, err := a.Known(ctx, "cch_a"); err != nil || !known {
		t.Fatalf("registered ID lost across reopen: %v %v", known, err)
	}
	if err := b.Forget(ctx, "cch_a"); err != nil {
		t.Fatal(err)
	}
	known, _ := a.Known(ctx, "cch_a")
	pending, _ := a.List(ctx, "cch_a")
	_, done, _ := a.Lookup(ctx, "cch_a", "m2")
	if known || len(pending) != 0 || !done {
		t.Fatalf("after Forget: known=%v pending=%d completed=%v; want the ID and its pending gone, its completed record kept for a handover's resends", known, len(pending), done)
	}
}

// TestRegistry_CapAcrossReplicas: the cap counts every replica's IDs.
func TestRegistry_CapAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	url := srv.NewDatabase(t)
	a := openStore(t, url, pgstore.Options{RegistryCap: 2})
	b := openStore(t, url, pgstore.Options{RegistryCap: 2})
	for _, err := range []error{a.Register(ctx, "one"), b.Register(ctx, "two"), b.Register(ctx, "one")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var e *imv2.Error
	if err := a.Register(ctx, "three"); !errors.As(err, &e) || e.Code != imv2.CodeChannelUnavailable {
		t.Fatalf("Register beyond the cap: %v, want code %s", err, imv2.CodeChannelUnavailable)
	}
	if err := a.Forget(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if err := b.Register(ctx, "three"); err != nil {
		t.Fatalf("Register after Forget made room: %v", err)
	}
}
