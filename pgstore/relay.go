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
// after it broke, and the first pause before a failed adopt is tried
// again; each further failure of an adopt doubles it up to relayRetryMax.
const relayRetry = 200 * time.Millisecond

// relayRetryMax bounds the pause between tries of a failed adopt: a
// database back from an outage has its relayed messages sent within it.
const relayRetryMax = 2 * time.Second

// SendTimeout bounds a Relay.Send: the registry check, the pending Add and
// the adopt that follows it. A database that stopped answering fails a
// Send with a retryable connector_channel_unavailable within it, instead
// of holding the caller (an HTTP handler of the platform's webhook) for
// as long as the caller's own deadline allows.
const SendTimeout = 5 * time.Second

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
//
// Send returns within SendTimeout, and its errors are *imv2.Error: a
// database failure is connector_channel_unavailable with Retryable set
// (the message was not accepted; send it again with the same
// message_id). Once Send returned a message_id, the message is in the
// shared store and reaches xAgent: an adopt that fails is retried by Run
// until it succeeds or the message expires.
func (r *Relay) Send(ctx context.Context, channelID string, m imv2.ChatMessage) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, SendTimeout)
	defer cancel()
	if srv := r.server(); srv != nil && srv.IsOpen(channelID) {
		if ch := srv.Channel(channelID); ch != nil {
			id, err := ch.Send(ctx, m)
			return id, unavailable("relay: send", err)
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
		return "", unavailable("relay: registry", err)
	}
	if !known {
		return "", imv2.Errorf(protocol.CodeConnectionNotFound, "channel %q is not registered", channelID)
	}
	e := imv2.PendingEntry{ChannelID: channelID, Message: m, Created: r.st.clock.Now()}
	if err := r.st.add(ctx, e, true); err != nil {
		return "", unavailable("relay: pending store", err)
	}
	// The channel may have opened here since the check above, after its
	// Channel listed the store, and this replica skips its own notices:
	// look again now that the entry is committed. An open after this
	// look lists the store (or is kicked) after the commit. If this
	// adopt fails, Run tries again.
	if r.adopt(ctx, channelID) != nil {
		r.ChannelOpened(channelID)
	}
	return m.MessageID, nil
}

// unavailable returns err as an *imv2.Error: one already is kept (a
// pending_full, a message_id_conflict); any other (the database's, a
// deadline) is connector_channel_unavailable and retryable.
func unavailable(what string, err error) error {
	var e *imv2.Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	e = imv2.Errorf(imv2.CodeChannelUnavailable, "pgstore: %s: %w", what, err)
	e.Retryable = true
	return e
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
	// Channels whose adopt failed (the database away or slow): tried
	// again after a pause that doubles per failed round, so no relayed
	// message waits for the next notification, which may never come.
	failed := map[string]bool{}
	pause := relayRetry
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		var again map[string]bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.catchup: // listening again, or a queue overflowed
			again = r.adoptAll(ctx)
		case id := <-notes:
			again = r.adoptBatch(ctx, id, notes)
		case id := <-r.kick:
			again = r.adoptBatch(ctx, id, r.kick)
		case <-retry.C:
			ids := failed
			failed = map[string]bool{}
			again = map[string]bool{}
			for id := range ids {
				if r.adopt(ctx, id) != nil {
					again[id] = true
				}
			}
			if len(again) > 0 {
				pause = min(2*pause, relayRetryMax)
			} else {
				pause = relayRetry
			}
		}
		for id := range again {
			if !failed[id] && len(failed) == 0 {
				retry.Reset(pause)
			}
			failed[id] = true
		}
	}
}

// adoptBatch adopts for first and every other channel already queued on
// q, each once: a burst of Adds on one channel costs one List, not one
// per message. It returns the channels whose adopt failed.
func (r *Relay) adoptBatch(ctx context.Context, first string, q <-chan string) map[string]bool {
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
	var failed map[string]bool
	for _, id := range ids {
		if r.adopt(ctx, id) != nil {
			if failed == nil {
				failed = map[string]bool{}
			}
			failed[id] = true
		}
	}
	return failed
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
// It returns the error of an adopt to try again (the store failed); a
// channel not open here, or closed meanwhile, has nothing to retry: the
// replica it opens on next adopts its entries then.
func (r *Relay) adopt(ctx context.Context, channelID string) error {
	srv := r.server()
	if srv == nil || !srv.IsOpen(channelID) {
		return nil
	}
	ch := srv.Channel(channelID)
	if ch == nil {
		return nil
	}
	// Bounded, so a database that stopped answering holds Run's loop
	// (and every other channel's adopt) no longer than this.
	actx, cancel := context.WithTimeout(ctx, SendTimeout)
	defer cancel()
	_, err := ch.AdoptPending(actx)
	if err == nil || errors.Is(err, imv2.ErrClosed) {
		return nil
	}
	if ctx.Err() == nil {
		r.st.logf("pgstore: relay: channel %q: adopt failed; trying again: %v", channelID, err)
	}
	return err
}

// adoptAll adopts for every channel open here and returns those whose
// adopt failed.
func (r *Relay) adoptAll(ctx context.Context) map[string]bool {
	srv := r.server()
	if srv == nil {
		return nil
	}
	var failed map[string]bool
	for _, id := range srv.ChannelIDs() {
		if r.adopt(ctx, id) != nil {
			if failed == nil {
				failed = map[string]bool{}
			}
			failed[id] = true
		}
	}
	return failed
}

// logf reports a condition the caller cannot act on; the Store has no
// logger of its own, so it goes to Options.Logger when set.
func (s *Store) logf(format string, args ...any) {
	if s.log != nil {
		s.log.Warn(fmt.Sprintf(format, args...))
	}
}
