package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/clock"
	"github.com/xagentkit/imv2/state"
)

// Defaults of Options.
const (
	// DefaultLockTimeout is how long Open waits for another process to
	// release the file before it gives up with ErrLocked.
	DefaultLockTimeout = time.Second
	// DefaultFileMode is the permission of a new database file: the
	// records name channels and messages, so only the owner reads them.
	DefaultFileMode os.FileMode = 0o600
)

// Options configure Open. Zero fields take the defaults named on each.
type Options struct {
	// Clock times completed records, their TTL and the sweeper.
	// Default clock.System{}.
	Clock clock.Clock
	// PendingCap bounds pending entries per channel; Add beyond it fails
	// with code pending_full. Default imv2.DefaultPendingCap (1000).
	PendingCap int
	// CompletedCap bounds completed records across all channels; the
	// oldest record is evicted to make room, unless its channel is within
	// its share of the cap and the record younger than 1 h: then a
	// channel over its share loses one (completedshare.go). Default
	// imv2.DefaultCompletedCap (100,000).
	CompletedCap int
	// CompletedTTL is how long a completed record is kept. Default
	// imv2.DefaultCompletedTTL (24h).
	CompletedTTL time.Duration
	// BindingCap bounds the kit's conversation bindings; Bind of a new
	// channel beyond it fails with code connector_channel_unavailable, as
	// state.MemoryBindingStore does. Default
	// state.DefaultMaxBindings (100,000).
	BindingCap int
	// SweepInterval, when positive, starts a sweeper that calls Sweep
	// that often on Clock until Close. Default 0: no sweeper (Record still
	// trims a few expired records each time, and CompletedCap bounds the
	// file either way).
	SweepInterval time.Duration
	// OnSweep, if set, is called after each sweep of the sweeper with the
	// number of records removed and the error, if any. It is the only
	// place an error of a background sweep shows.
	OnSweep func(removed int, err error)
	// LockTimeout bounds the wait for the file lock. Default
	// DefaultLockTimeout (1s).
	LockTimeout time.Duration
	// FileMode is the permission of a new file. Default DefaultFileMode.
	FileMode os.FileMode
}

// Errors of Open, for errors.Is.
var (
	// ErrLocked: another process (or another Store in this one) holds the
	// file. bbolt allows one writer process per file.
	ErrLocked = errors.New("boltstore: database is locked by another process")
	// ErrLayoutVersion: the file was written by a newer layout than this
	// build reads (see LayoutVersion).
	ErrLayoutVersion = errors.New("boltstore: unsupported layout version")
)

// openError carries a specific message and matches a sentinel.
type openError struct {
	msg   string
	kind  error
	cause error
}

func (e *openError) Error() string        { return e.msg }
func (e *openError) Is(target error) bool { return target == e.kind }
func (e *openError) Unwrap() error        { return e.cause }

// Store is a durable imv2.PendingStore and imv2.CompletedStore in one bbolt
// file. Its pending entries and completed records live in separate buckets
// with separate lifecycles (S9). It is safe for concurrent use; Close it
// when done.
type Store struct {
	db           *bolt.DB
	path         string
	clock        clock.Clock
	pendingCap   uint64
	completedCap uint64
	bindingCap   int
	ttl          time.Duration
	interval     time.Duration
	onSweep      func(int, error)
	sweepBatch   int    // records per Sweep transaction; a field so tests can shrink it
	epoch        uint64 // this open's open_epoch: claims of other epochs are orphaned (claim.go)
	group        groupCommit

	mu       sync.Mutex // guards closed, timer and wg.Add
	closed   bool
	timer    clock.Timer
	sweeping sync.WaitGroup
	ctx      context.Context // cancelled by Close, stops a running sweep
	cancel   context.CancelFunc
}

var (
	_ imv2.PendingStore   = (*Store)(nil)
	_ imv2.CompletedStore = (*Store)(nil)
)

// Open opens or creates the store at path. It fails with ErrLocked if
// another process holds the file for longer than Options.LockTimeout, and
// with ErrLayoutVersion if a newer build wrote it.
func Open(path string, opts Options) (*Store, error) {
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.PendingCap <= 0 {
		opts.PendingCap = imv2.DefaultPendingCap
	}
	if opts.CompletedCap <= 0 {
		opts.CompletedCap = imv2.DefaultCompletedCap
	}
	if opts.BindingCap <= 0 {
		opts.BindingCap = state.DefaultMaxBindings
	}
	if opts.CompletedTTL <= 0 {
		opts.CompletedTTL = imv2.DefaultCompletedTTL
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout // bbolt's 0 would wait forever
	}
	if opts.FileMode == 0 {
		opts.FileMode = DefaultFileMode
	}
	db, err := bolt.Open(path, opts.FileMode, &bolt.Options{Timeout: opts.LockTimeout})
	if errors.Is(err, bberrors.ErrTimeout) {
		return nil, &openError{
			msg:   fmt.Sprintf("boltstore: database %s is locked by another process (waited %v)", path, opts.LockTimeout),
			kind:  ErrLocked,
			cause: err,
		}
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	var epoch uint64
	if err := db.Update(func(tx *bolt.Tx) error {
		if err := initLayout(tx, path); err != nil {
			return err
		}
		var err error
		if epoch, err = openClaims(tx); err != nil {
			return err
		}
		if err := openXAgentChannels(tx); err != nil {
			return err
		}
		return openBindings(tx)
	}); err != nil {
		_ = db.Close() // the layout error is the one to report
		return nil, err
	}
	s := &Store{
		db:           db,
		path:         path,
		clock:        opts.Clock,
		pendingCap:   uint64(opts.PendingCap),
		completedCap: uint64(opts.CompletedCap),
		bindingCap:   opts.BindingCap,
		ttl:          opts.CompletedTTL,
		interval:     opts.SweepInterval,
		onSweep:      opts.OnSweep,
		sweepBatch:   defaultSweepBatch,
		epoch:        epoch,
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if s.interval > 0 {
		s.mu.Lock()
		s.timer = s.clock.AfterFunc(s.interval, s.sweepTick)
		s.mu.Unlock()
	}
	return s, nil
}

// Pending returns s as the sender's pending store, for imv2.Options.Pending.
func (s *Store) Pending() imv2.PendingStore { return s }

// Completed returns s as the receiver's completed store, for
// imv2.Options.Completed.
func (s *Store) Completed() imv2.CompletedStore { return s }

// Path returns the file the store was opened on.
func (s *Store) Path() string { return s.path }

// Close stops the sweeper, waits for a sweep in progress and closes the
// file, releasing its lock. Calls after the first return nil; any other
// call after Close fails with code closed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.cancel()
	s.mu.Unlock()
	s.sweeping.Wait()
	return s.db.Close()
}

// sweepTick runs on the clock's timer: sweep, report, schedule the next.
func (s *Store) sweepTick() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.sweeping.Add(1)
	s.mu.Unlock()
	defer s.sweeping.Done()

	n, err := s.Sweep(s.ctx)
	if s.onSweep != nil {
		s.onSweep(n, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.timer = s.clock.AfterFunc(s.interval, s.sweepTick)
	}
}

// Stats are counts of what the file holds.
type Stats struct {
	// Pending is the number of pending entries over all channels.
	Pending int
	// Completed is the number of completed records, expired ones
	// included until a sweep removes them.
	Completed int
	// FileBytes is the size of the pages bbolt uses. The file itself
	// grows in steps of up to 16 MiB, reuses freed pages and never
	// shrinks.
	FileBytes int64
}

// Stats counts the pending entries and completed records. It reads one
// counter per channel with pending entries.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.view(ctx, func(tx *bolt.Tx) error {
		st.Completed = int(getU64(tx.Bucket(bucketMeta), keyCompletedCount))
		st.FileBytes = tx.Size()
		return tx.Bucket(bucketPendingCount).ForEach(func(_, v []byte) error {
			if len(v) == 8 {
				st.Pending += int(beUint64(v))
			}
			return nil
		})
	})
	return st, err
}

func (s *Store) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.wrap(s.db.View(fn))
}

// update runs fn in a write transaction shared with concurrent calls
// (groupcommit.go), committed with fsync before it returns. fn must leave
// no trace when it fails and be safe to run again. An fn that returns
// errNoChange wrote nothing, and update returns nil.
func (s *Store) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.wrap(s.group.update(s.db, fn))
}

// updateAlone is update in a transaction of its own, for an fn that runs
// a caller's function, which must run once.
func (s *Store) updateAlone(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.db.Update(fn)
	if errors.Is(err, errNoChange) {
		return nil
	}
	return s.wrap(err)
}

var errNoChange = errors.New("boltstore: no change")

// wrap turns bbolt's closed-database error into code closed.
func (s *Store) wrap(err error) error {
	if errors.Is(err, bberrors.ErrDatabaseNotOpen) {
		return imv2.Errorf(imv2.CodeClosed, "boltstore: %s is closed", s.path)
	}
	return err
}
