package pgstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// pendingChannel is the LISTEN/NOTIFY channel on which every Add announces
// "a pending entry appeared for channel X", committed with the entry.
const pendingChannel = "imv2_pending"

// notice is the payload of a pending notification: the Store's id and the
// channel ID in hex (channel IDs are bytes; a payload is text).
func (s *Store) notice(channelID string) string {
	return s.id + " " + hex.EncodeToString([]byte(channelID))
}

// parseNotice reads a pending notification's payload (notice); ok is
// false for anything else, including a channel ID no Store could hold.
func parseNotice(payload string) (from, channelID string, ok bool) {
	from, hexID, ok := strings.Cut(payload, " ")
	if !ok || from == "" {
		return "", "", false
	}
	id, err := hex.DecodeString(hexID)
	if err != nil || checkChannel(string(id)) != nil {
		return "", "", false
	}
	return from, string(id), true
}

// relayKicks bounds the channel IDs queued for a Relay's loop; beyond it
// a kick is folded into a catch-up of every open channel.
const relayKicks = 1024

// relayRetry is the pause before the listening connection is made again
// after it broke.
const relayRetry = 200 * time.Millisecond

// Relay carries user messages between Connector replicas on one database.
// A replica that does not hold xAgent's connection for a channel adds the
// message to the shared pending store (Send); the replica that holds it is
// told by PostgreSQL NOTIFY, committed with the Add, and sends it through
// its Channel (imv2.Channel.AdoptPending). The store's pending entry is the
// message's only copy, so it is sent by whoever holds the connection, and
// removed on its ack: exactly once to xAgent's Target (its completed
// store answers a resend duplicate). Messages one replica adds are sent in
// the order of its Adds (the store's order); messages added on two
// replicas at once are sent in the order the holder learns of them, and a
// resend after a lost ack can overtake, as on one replica.
//
// Wire it into the Server and run it:
//
//	relay := pgstore.NewRelay(st)
//	srv, _ := dataplane.NewServer(dataplane.ServerConfig{..., Registry: st, OnChannelOpen: relay.ChannelOpened})
//	relay.Serve(srv)
//	go relay.Run(ctx)
//
// A missed notification (the listening connection broke) is caught up when
// it is listening again: every channel open here adopts what is pending.
type Relay struct {
	st      *Store
	kick    chan string
	catchup chan struct{} // one token: adopt for every open channel

	mu  sync.Mutex
	srv state.OpenChannels
}

// NewRelay returns a Relay over st. Call Serve before Run.
func NewRelay(st *Store) *Relay {
	return &Relay{st: st, kick: make(chan string, relayKicks), catchup: make(chan struct{}, 1)}
}

// Serve names the Server whose open channels the Relay feeds (a
// *dataplane.Server).
func (r *Relay) Serve(srv state.OpenChannels) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.srv = srv
}

func (r *Relay) server() state.OpenChannels {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv
}

// ChannelOpened is for ServerConfig.OnChannelOpen: a channel (re)opened
// here adopts what other replicas added while it was open elsewhere. It
// never blocks: when the queue is full the kick becomes a catch-up of
// every open channel.
func (r *Relay) ChannelOpened(channelID string) {
	select {
	case r.kick <- channelID:
	default:
		r.behind()
	}
}

// behind asks Run for a catch-up of every open channel.
func (r *Relay) behind() {
	select {
	case r.catchup <- struct{}{}:
	default: // one is already asked for
	}
}

// Send delivers a user message on a channel: through the Channel when the
// channel is open on this replica's Server, otherwise by adding it to the
// shared pending store, from which the replica holding the connection
// sends it (or this one, when xAgent reconnects here). An empty MessageID
// is generated. The channel must be registered (channel IDs are shared);
// an unknown one fails with code connection_not_found.
func (r *Relay) Send(ctx context.Context, channelID string, m imv2.ChatMessage) (string, error) {
	if srv := r.server(); srv != nil && srv.IsOpen(channelID) {
		if ch := srv.Channel(channelID); ch != nil {
			return ch.Send(ctx, m)
		}
	}
	if m.MessageID == "" {
		m.MessageID = imv2.NewMessageID()
	}
	if err := m.Validate(imv2.ToXAgent); err != nil {
		return "", err
	}
	known, err := r.st.Known(ctx, channelID)
	if err != nil {
		return "", err
	}
	if !known {
		return "", imv2.Errorf(protocol.CodeConnectionNotFound, "channel %q is not registered", channelID)
	}
	e := imv2.PendingEntry{ChannelID: channelID, Message: m, Created: r.st.clock.Now()}
	if err := r.st.Add(ctx, e); err != nil {
		return "", err
	}
	// The channel may have opened here since the check above, after its
	// Channel listed the store, and this replica skips its own notices:
	// look again now that the entry is committed. An open after this
	// look lists the store (or is kicked) after the commit.
	r.adopt(ctx, channelID)
	return m.MessageID, nil
}

// Run listens for pending notifications until ctx is done, and has every
// notified channel that is open on the Server adopt its new entries. It
// returns ctx's error; a broken listening connection is made again.
func (r *Relay) Run(ctx context.Context) error {
	notes := make(chan string, relayKicks)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.listen(ctx, notes)
	}()
	defer func() { <-done }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.catchup: // listening again, or a queue overflowed
			r.adoptAll(ctx)
		case id := <-notes:
			r.adoptBatch(ctx, id, notes)
		case id := <-r.kick:
			r.adoptBatch(ctx, id, r.kick)
		}
	}
}

// adoptBatch adopts for first and every other channel already queued on
// q, each once: a burst of Adds on one channel costs one List, not one
// per message.
func (r *Relay) adoptBatch(ctx context.Context, first string, q <-chan string) {
	ids := []string{first}
	seen := map[string]bool{first: true}
	for len(ids) < relayKicks {
		select {
		case id := <-q:
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
			continue
		default:
		}
		break
	}
	for _, id := range ids {
		r.adopt(ctx, id)
	}
}

// listen holds one pooled connection in LISTEN and forwards the channel
// IDs of other Stores' Adds. A full queue folds the notice into a
// catch-up of every channel.
func (r *Relay) listen(ctx context.Context, notes chan<- string) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, notes)
		if ctx.Err() != nil {
			return
		}
		r.st.logf("pgstore: relay: listening connection lost; listening again: %v", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(relayRetry):
		}
	}
}

func (r *Relay) listenOnce(ctx context.Context, notes chan<- string) error {
	conn, err := r.st.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// A connection in LISTEN must not serve other queries.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pendingChannel); err != nil {
		return err
	}
	r.behind() // catch up what was added while not listening
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		from, id, ok := parseNotice(n.Payload)
		if !ok || from == r.st.id {
			continue // tolerant reader: not one of ours, or our own Add
		}
		select {
		case notes <- id:
		default:
			r.behind()
		}
	}
}

// adopt has the channel adopt its new pending entries if it is open here.
func (r *Relay) adopt(ctx context.Context, channelID string) {
	srv := r.server()
	if srv == nil || !srv.IsOpen(channelID) {
		return
	}
	ch := srv.Channel(channelID)
	if ch == nil {
		return
	}
	if _, err := ch.AdoptPending(ctx); err != nil && !errors.Is(err, imv2.ErrClosed) && ctx.Err() == nil {
		r.st.logf("pgstore: relay: channel %q: %v", channelID, err)
	}
}

func (r *Relay) adoptAll(ctx context.Context) {
	srv := r.server()
	if srv == nil {
		return
	}
	for _, id := range srv.ChannelIDs() {
		r.adopt(ctx, id)
	}
}

// logf reports a condition the caller cannot act on; the Store has no
// logger of its own, so it goes to Options.Logger when set.
func (s *Store) logf(format string, args ...any) {
	if s.log != nil {
		s.log.Warn(fmt.Sprintf(format, args...))
	}
}
