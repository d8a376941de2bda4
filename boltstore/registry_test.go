package boltstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
	"github.com/xagentkit/imv2/state"
)

var _ state.ChannelRegistry = (*boltstore.Store)(nil)

// TestRegistry_W5_S8_SurvivesReopenAndForgetDropsState: a registered
// channel ID is known after the file is reopened (a restart reuses it), and
// Forget removes it with the channel's pending state (S7); its completed
// records stay until their TTL, for a resend under the replacement ID.
func TestRegistry_W5_S8_SurvivesReopenAndForgetDropsState(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if known, _ := st.Known(ctx, "cch_a"); known {
		t.Fatal("unregistered ID known")
	}
	if err := st.Register(ctx, "cch_a"); err != nil {
		t.Fatal(err)
	}
	if err := st.Add(ctx, imv2.PendingEntry{ChannelID: "cch_a", Message: imv2.ChatMessage{MessageID: "m1", Text: "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Record(ctx, "cch_a", "m2", imv2.Fingerprint{1}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if known, err := st.Known(ctx, "cch_a"); err != nil || !known {
		t.Fatalf("registered ID lost across reopen: %v %v", known, err)
	}
	if err := st.Forget(ctx, "cch_a"); err != nil {
		t.Fatal(err)
	}
	known, _ := st.Known(ctx, "cch_a")
	pending, _ := st.List(ctx, "cch_a")
	_, done, _ := st.Lookup(ctx, "cch_a", "m2")
	if known || len(pending) != 0 || !done {
		t.Fatalf("after Forget: known=%v pending=%d completed=%v; want false, 0, true", known, len(pending), done)
	}
}
