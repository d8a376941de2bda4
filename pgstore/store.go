package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/state"
)

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// Clock times completed records and their TTL; every replica on one
	// database should use clocks that agree (the system clock,
	// NTP-synced). Claim leases are timed by the database server's clock
	// (clock_timestamp()), so replicas' skew cannot end a live claim,
	// unless Clock is set: then Clock times them too (tests drive leases
	// with fakeclock), and a replica whose Clock runs ahead of the others
	// by more than a lease takes their live claims over. Default
	// clock.System{} for records, the server's clock for leases.
	Clock clock.Clock
	// PendingCap bounds pending entries per channel; Add beyond it fails
	// with code pending_full. Default imv2.DefaultPendingCap (1000).
	PendingCap int
	// CompletedCap bounds completed records across all channels and all
	// replicas; the oldest record is evicted to make room, unless its
	// channel is within its share of the cap and the record younger than
	// 1 h: then a channel over its share loses one. Default
	// imv2.DefaultCompletedCap (100,000).
	CompletedCap int
	// CompletedTTL is how long a completed record is kept, and how long an
	// orphaned claim is kept after its lease ran out. Default
	// imv2.DefaultCompletedTTL (24h).
	CompletedTTL time.Duration
	// RegistryCap bounds the channel IDs registered (all replicas);
	// Register beyond it fails with code connector_channel_unavailable.
	// Default DefaultRegistryCap (100,000).
	RegistryCap int
	// BindingCap bounds the kit's conversation bindings (all replicas);
	// Bind of a new channel beyond it fails with code
	// connector_channel_unavailable. Default state.DefaultMaxBindings
	// (100,000).
	BindingCap int
	// Logger receives what the Store cannot report to a caller (a Relay
	// whose listening connection broke). Default: nothing.
	Logger *slog.Logger
}

// DefaultMaxConns is the connections a Store opens at most when its
// url sets no pool_max_conns (connections open as concurrent calls need
// them). Each replica may open as many: the server's max_connections must
// allow replicas × DefaultMaxConns.
const DefaultMaxConns = 16

// DefaultRegistryCap bounds the channel registry, as
// state.DefaultRegistryCap bounds the in-memory one.
const DefaultRegistryCap = 100_000

// inlineSweep bounds the expired records and orphaned claims one Record
// removes, so a Record after a long idle time stays quick.
const inlineSweep = 16

// Store keeps pending messages, completed records, claims and registered
// channel IDs in one PostgreSQL database, shared by every replica that
// opens it. It implements imv2.PendingStore, imv2.CompletedStore,
// imv2.ClaimStore, state.ChannelRegistry and state.BindingStore:
// it is a state.Store. For the xAgent side it implements
// state.ChannelStore (xagent.go). It is safe for concurrent
// use, by goroutines and by processes.
type Store struct {
	pool         *pgxpool.Pool
	clock        clock.Clock
	leaseClock   clock.Clock // nil: the server's (leaseNow)
	pendingCap   int
	completedCap int64
	ttl          time.Duration
	registryCap  int
	bindingCap   int
	// id names this Store in its pending notifications, so a Relay skips
	// the ones its own Adds caused.
	id  string
	log *slog.Logger
	// group batches concurrent Claims and Records (groupcommit.go).
	group groupCommit
}

// Open connects to the database named by url (a PostgreSQL connection
// string or URL, as pgx reads it; pool_max_conns in it overrides
// DefaultMaxConns), creates or migrates its schema (see
// schema.go) and returns the Store. Close releases its connections.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgx's default, max(4, CPUs), would let only that many calls of
		// all channels wait on the server at once: with each commit's
		// WAL flush a wait, throughput would stop at that many commits
		// per flush. More connections let PostgreSQL flush many commits
		// at once.
		cfg.MaxConns = max(cfg.MaxConns, DefaultMaxConns)
	}
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		// The group statements (groupcommit.go) take arrays, whose length
		// a custom plan knows and a generic one guesses: left to choose,
		// the server plans them anew at every call, which costs more than
		// running them. Every statement here is index lookups, which a
		// generic plan serves as well.
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s := &Store{
		pool:         pool,
		clock:        opts.Clock,
		leaseClock:   opts.Clock,
		pendingCap:   opts.PendingCap,
		completedCap: int64(opts.CompletedCap),
		ttl:          opts.CompletedTTL,
		registryCap:  opts.RegistryCap,
		bindingCap:   opts.BindingCap,
		id:           uuid.NewString(),
		log:          opts.Logger,
	}
	if s.clock == nil {
		s.clock = clock.System{}
	}
	if s.pendingCap <= 0 {
		s.pendingCap = imv2.DefaultPendingCap
	}
	if s.completedCap <= 0 {
		s.completedCap = imv2.DefaultCompletedCap
	}
	if s.ttl <= 0 {
		s.ttl = imv2.DefaultCompletedTTL
	}
	if s.registryCap <= 0 {
		s.registryCap = DefaultRegistryCap
	}
	if s.bindingCap <= 0 {
		s.bindingCap = state.DefaultMaxBindings
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the Store's connections. Data stays in the database.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Pending returns s as the imv2.PendingStore, for symmetry with boltstore.
func (s *Store) Pending() imv2.PendingStore { return s }

// Completed returns s as the imv2.ClaimStore (a CompletedStore).
func (s *Store) Completed() imv2.ClaimStore { return s }

// tx runs f in one transaction, retrying it a few times when PostgreSQL
// aborts it for a serialization failure or a deadlock (neither happens
// with the lock order this package keeps, but a tolerant caller costs
// nothing).
func (s *Store) tx(ctx context.Context, f func(tx pgx.Tx) error) error {
	var err error
	for range 3 {
		err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, f)
		if !retryable(err) {
			break
		}
	}
	if err != nil {
		var e *imv2.Error
		if errors.As(err, &e) {
			return err
		}
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// retryable reports a serialization failure (40001) or a deadlock (40P01).
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// batch sends the statements queue puts in a pgx.Batch in one round trip,
// which PostgreSQL runs as one implicit transaction, committed before
// batch returns; it retries as tx does. queue is called once per try.
func (s *Store) batch(ctx context.Context, queue func(b *pgx.Batch)) error {
	var err error
	for range 3 {
		b := &pgx.Batch{}
		queue(b)
		err = s.pool.SendBatch(ctx, b).Close()
		if !retryable(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// nowNS is the Store clock's now in Unix nanoseconds, the unit of every
// time column.
func (s *Store) nowNS() int64 { return s.clock.Now().UnixNano() }

// lockMessage takes the transaction-scoped advisory lock of one message,
// which serialises Claim, Release and Record of that message across
// replicas: each sees the others' committed result, never a half.
func lockMessage(ctx context.Context, tx pgx.Tx, channelID, messageID string) error {
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", messageKey(channelID, messageID))
	return err
}

// messageKey is the advisory lock key of one message.
func messageKey(channelID, messageID string) int64 {
	h := fnv.New64a()
	h.Write([]byte("imv2 message\x00"))
	h.Write([]byte(channelID))
	h.Write([]byte{0})
	h.Write([]byte(messageID))
	return int64(h.Sum64())
}

// checkIDs validates a channel and message ID the way boltstore does, so
// a store can be swapped for the other without new failures.
func checkIDs(channelID, messageID string) error {
	if err := checkChannel(channelID); err != nil {
		return err
	}
	if messageID == "" || len(messageID) > imv2.MaxIDBytes {
		return imv2.Errorf(imv2.CodeInvalidPacket, "pgstore: message_id is %d bytes; want 1 to %d", len(messageID), imv2.MaxIDBytes)
	}
	return nil
}

func checkChannel(channelID string) error {
	if channelID == "" || len(channelID) > imv2.MaxIDBytes {
		return imv2.Errorf(imv2.CodeInvalidPacket, "pgstore: channel ID is %d bytes; want 1 to %d", len(channelID), imv2.MaxIDBytes)
	}
	if strings.IndexByte(channelID, 0) >= 0 {
		return imv2.Errorf(imv2.CodeInvalidPacket, "pgstore: channel ID contains a 0x00 byte")
	}
	return nil
}
