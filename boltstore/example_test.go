package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
)

// A pending message and a completed record both survive a restart.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "boltstore-example")
	defer func() { _ = os.RemoveAll(dir) }()
	path := filepath.Join(dir, "imv2.db")
	ctx := context.Background()

	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := imv2.ChatMessage{MessageID: "m-1", Text: "hello"}
	_ = st.Pending().Add(ctx, imv2.PendingEntry{ChannelID: "ch-1", Message: m})
	_ = st.Completed().Record(ctx, "ch-1", "in-7", imv2.FingerprintOf(&imv2.ChatMessage{Text: "hi"}))
	_ = st.Close() // the process stops

	st, err = boltstore.Open(path, boltstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = st.Close() }()
	// A Channel takes both views of the one store.
	_ = &imv2.Options{Pending: st.Pending(), Completed: st.Completed()}
	pending, _ := st.Pending().List(ctx, "ch-1")
	fmt.Println("pending:", pending[0].Message.MessageID, pending[0].Message.Text)
	_, done, _ := st.Completed().Lookup(ctx, "ch-1", "in-7")
	fmt.Println("in-7 completed:", done)

	// Only one process may hold the file.
	_, err = boltstore.Open(path, boltstore.Options{LockTimeout: 50 * time.Millisecond})
	fmt.Println("second Open locked:", errors.Is(err, boltstore.ErrLocked))
	// Output:
	// pending: m-1 hello
	// in-7 completed: true
	// second Open locked: true
}
