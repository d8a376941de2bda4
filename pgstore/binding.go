package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
	"github.com/xagentkit/imv2/state"
)

// A Store is everything a kit Connector keeps (connector.Options.Store).
var (
	_ state.BindingStore   = (*Store)(nil)
	_ state.BindingUpdater = (*Store)(nil)
	_ state.Store          = (*Store)(nil)
)

// bindingLock serialises the cap check of Binds that add a channel, across
// replicas; a rebind of a bound channel does not take it.
const bindingLock = 0x696d76325f62696e // "imv2_bin"

// Bind implements state.BindingStore: it creates or replaces the
// binding of b.ChannelID and keeps the reference count of the keys it
// leaves and joins, in one transaction committed when Bind returns. The
// channel's row is locked first (FOR UPDATE), so two replicas rebinding
// one channel at once count its old key down once. A new channel beyond
// Options.BindingCap bindings fails with code
// connector_channel_unavailable. Released is decided on the old key's
// count row, locked in the same transaction.
func (s *Store) Bind(ctx context.Context, b state.Binding) (state.BindingChange, error) {
	if err := state.CheckBinding(b); err != nil {
		return state.BindingChange{}, err
	}
	ch, key := []byte(b.ChannelID), []byte(b.Key)
	var change state.BindingChange
	err := s.tx(ctx, func(tx pgx.Tx) error {
		change = state.BindingChange{}
		oldRow, had, err := lockBinding(ctx, tx, ch)
		if err != nil {
			return err
		}
		if !had {
			// A channel without a row has nothing to lock: the advisory
			// lock orders new channels, and the second look sees a row a
			// concurrent Bind committed meanwhile.
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(bindingLock)); err != nil {
				return err
			}
			if oldRow, had, err = lockBinding(ctx, tx, ch); err != nil {
				return err
			}
		}
		var old []byte
		if had {
			old = oldRow.key
			// A corrupt old row is replaced all the same; its key counts.
			change.Old, _ = oldRow.binding(b.ChannelID)
			change.Old.ChannelID, change.Old.Key, change.Had = b.ChannelID, string(old), true
		}
		if !had {
			var n int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM imv2_bindings").Scan(&n); err != nil {
				return err
			}
			if n >= s.bindingCap {
				return imv2.Errorf(imv2.CodeChannelUnavailable, "pgstore: %d bindings, the cap", s.bindingCap)
			}
		}
		ids, handles := draftColumns(b.Drafts)
		if _, err := tx.Exec(ctx, `INSERT INTO imv2_bindings
			(channel_id, key, provider, label, display_name, account_hint, state, created_ms, data, draft_ids, draft_handles)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
			ON CONFLICT (channel_id) DO UPDATE SET key = $2, provider = $3, label = $4,
				display_name = $5, account_hint = $6, state = $7, created_ms = $8,
				data = $9, draft_ids = $10, draft_handles = $11`,
			ch, key, []byte(b.Target.Provider), []byte(b.Target.Label), []byte(b.Target.DisplayName),
			[]byte(b.Target.AccountHint), string(b.State), b.Created.UnixMilli(),
			append([]byte{}, b.Data...), ids, handles); err != nil {
			return err
		}
		switch {
		case !had:
			_, err := countKey(ctx, tx, key, +1)
			return err
		case bytes.Equal(old, key):
			return nil
		}
		// Two key rows, locked in byte order so that two rebinds in
		// opposite directions cannot deadlock.
		if bytes.Compare(old, key) < 0 {
			if change.Released, err = countKey(ctx, tx, old, -1); err != nil {
				return err
			}
			_, err = countKey(ctx, tx, key, +1)
			return err
		}
		if _, err := countKey(ctx, tx, key, +1); err != nil {
			return err
		}
		change.Released, err = countKey(ctx, tx, old, -1)
		return err
	})
	if err != nil {
		return state.BindingChange{}, err
	}
	return change, nil
}

// lockBinding returns the channel's row, locking it for the rest of the
// transaction.
func lockBinding(ctx context.Context, tx pgx.Tx, ch []byte) (r bindingRow, found bool, err error) {
	err = tx.QueryRow(ctx, "SELECT "+bindingColumns+" FROM imv2_bindings WHERE channel_id = $1 FOR UPDATE", ch).Scan(r.fields()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return bindingRow{}, false, nil
	}
	return r, err == nil, err
}

// countKey adds delta (±1) to the reference count of key; a count that
// reaches zero is deleted, so the table holds only keys in use, and
// zero reports it: the row is locked, so of concurrent transactions
// exactly one takes a count to zero.
func countKey(ctx context.Context, tx pgx.Tx, key []byte, delta int) (zero bool, err error) {
	if delta > 0 {
		_, err := tx.Exec(ctx, `INSERT INTO imv2_binding_keys (key, n) VALUES ($1, 1)
			ON CONFLICT (key) DO UPDATE SET n = imv2_binding_keys.n + 1`, key)
		return false, err
	}
	// The row is locked before it is read: a conditional UPDATE would
	// skip a row whose count a concurrent Bind raised but not committed.
	var n int64
	err = tx.QueryRow(ctx, "SELECT n FROM imv2_binding_keys WHERE key = $1 FOR UPDATE", key).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("reference count of conversation key %q is missing", key)
	}
	if err != nil {
		return false, err
	}
	if n > 1 {
		_, err = tx.Exec(ctx, "UPDATE imv2_binding_keys SET n = n - 1 WHERE key = $1", key)
		return false, err
	}
	_, err = tx.Exec(ctx, "DELETE FROM imv2_binding_keys WHERE key = $1", key)
	return err == nil, err
}

// Binding implements state.BindingStore.
func (s *Store) Binding(ctx context.Context, channelID string) (state.Binding, bool, error) {
	var r bindingRow
	err := s.pool.QueryRow(ctx, `SELECT `+bindingColumns+`
		FROM imv2_bindings WHERE channel_id = $1`, []byte(channelID)).Scan(r.fields()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Binding{}, false, nil
	}
	if err != nil {
		return state.Binding{}, false, fmt.Errorf("pgstore: %w", err)
	}
	b, err := r.binding(channelID)
	return b, err == nil, err
}

// Update implements state.BindingUpdater: the channel's row is read
// locked (FOR UPDATE) and rewritten in one transaction, so an Unbind or
// Update of another replica waits for it and sees its result, and it
// sees theirs: none undoes another's change. f runs inside the
// transaction (it must not call the Store) and runs again if the
// transaction is retried after a serialization failure or deadlock. The
// key does not change, so its reference count does not either. A row
// that no longer decodes fails Update (Unbind removes it).
func (s *Store) Update(ctx context.Context, channelID string, f func(*state.Binding) error) (state.Binding, bool, error) {
	var (
		old   state.Binding
		found bool
	)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		old, found = state.Binding{}, false
		r, had, err := lockBinding(ctx, tx, []byte(channelID))
		if err != nil || !had {
			return err
		}
		if old, err = r.binding(channelID); err != nil {
			return err
		}
		found = true
		b, err := state.ApplyBindingUpdate(old, f)
		if err != nil {
			return err // rolled back: nothing stored
		}
		ids, handles := draftColumns(b.Drafts)
		_, err = tx.Exec(ctx, `UPDATE imv2_bindings SET provider = $2, label = $3, display_name = $4,
			account_hint = $5, state = $6, created_ms = $7, data = $8, draft_ids = $9, draft_handles = $10
			WHERE channel_id = $1`,
			[]byte(channelID), []byte(b.Target.Provider), []byte(b.Target.Label), []byte(b.Target.DisplayName),
			[]byte(b.Target.AccountHint), string(b.State), b.Created.UnixMilli(),
			append([]byte{}, b.Data...), ids, handles)
		return err
	})
	return old, found, err
}

// Unbind implements state.BindingStore: the row goes and its key's
// reference count drops in one transaction, which decides Released; of
// two replicas unbinding one channel at once, exactly one finds the
// binding.
func (s *Store) Unbind(ctx context.Context, channelID string) (state.BindingChange, error) {
	var change state.BindingChange
	err := s.tx(ctx, func(tx pgx.Tx) error {
		change = state.BindingChange{}
		var r bindingRow
		err := tx.QueryRow(ctx, `DELETE FROM imv2_bindings WHERE channel_id = $1
			RETURNING `+bindingColumns,
			[]byte(channelID)).Scan(r.fields()...)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		released, err := countKey(ctx, tx, r.key, -1)
		if err != nil {
			return err
		}
		// A corrupt row is removed all the same: Unbind is how it goes.
		change.Old, _ = r.binding(channelID)
		change.Old.ChannelID, change.Old.Key = channelID, string(r.key)
		change.Had, change.Released = true, released
		return nil
	})
	if err != nil {
		return state.BindingChange{}, err
	}
	return change, nil
}

// Channels implements state.BindingStore: the channels bound to key,
// in byte order (Go's string order).
func (s *Store) Channels(ctx context.Context, key string) ([]string, error) {
	return s.channelIDs(ctx, "SELECT channel_id FROM imv2_bindings WHERE key = $1 ORDER BY channel_id", []byte(key))
}

// bindingColumns are the columns of imv2_bindings a bindingRow scans, in
// the order of its fields.
const bindingColumns = "key, provider, label, display_name, account_hint, state, created_ms, data, draft_ids, draft_handles"

// bindingRow is a row of imv2_bindings as scanned.
type bindingRow struct {
	key, provider, label, displayName, accountHint, data []byte
	state                                                string
	createdMS                                            int64
	draftIDs, draftHandles                               [][]byte
}

func (r *bindingRow) fields() []any {
	return []any{&r.key, &r.provider, &r.label, &r.displayName, &r.accountHint, &r.state, &r.createdMS,
		&r.data, &r.draftIDs, &r.draftHandles}
}

// draftColumns splits draft handles into the two array columns.
func draftColumns(ds []state.DraftHandle) (ids, handles [][]byte) {
	ids, handles = make([][]byte, len(ds)), make([][]byte, len(ds))
	for i, d := range ds {
		ids[i], handles[i] = []byte(d.MessageID), []byte(d.Handle)
	}
	return ids, handles
}

// binding is the row as a state.Binding, checked as Bind checked it:
// a row no build of this package wrote is an error, never a binding.
func (r *bindingRow) binding(channelID string) (state.Binding, error) {
	b := state.Binding{
		ChannelID: channelID, Key: string(r.key), State: state.BindingState(r.state), Created: time.UnixMilli(r.createdMS),
		Target: protocol.DescriptorTarget{
			Provider: string(r.provider), Label: string(r.label), DisplayName: string(r.displayName), AccountHint: string(r.accountHint),
		},
	}
	if len(r.data) > 0 {
		b.Data = r.data
	}
	if len(r.draftIDs) != len(r.draftHandles) {
		return state.Binding{}, fmt.Errorf("pgstore: stored binding of %q has %d draft IDs for %d handles", channelID, len(r.draftIDs), len(r.draftHandles))
	}
	for i, id := range r.draftIDs {
		b.Drafts = append(b.Drafts, state.DraftHandle{MessageID: string(id), Handle: string(r.draftHandles[i])})
	}
	if err := state.CheckBinding(b); err != nil {
		return state.Binding{}, fmt.Errorf("pgstore: stored binding of %q: %w", channelID, err)
	}
	return b, nil
}
