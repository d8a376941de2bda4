package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's versions, in order: migrations[i] brings a
// database from version i to version i+1. A released migration is never
// edited; a change is a new entry at the end.
//
// IDs are bytea, so any bytes a message_id holds survive exactly (text
// refuses 0x00). Times are Unix nanoseconds of the Store's clock, never
// the server's now(), so every replica and the tests agree on one time.
var migrations = [...]string{
	// 1: pending entries, completed records with their eviction order,
	// claims, the completed count, and the channel registry.
	`
CREATE TABLE imv2_pending (
	channel_id  bytea  NOT NULL,
	message_id  bytea  NOT NULL,
	seq         bigint GENERATED ALWAYS AS IDENTITY,
	fingerprint bytea  NOT NULL,
	created_s   bigint NOT NULL,
	created_ns  int    NOT NULL,
	message     bytea  NOT NULL,
	PRIMARY KEY (channel_id, message_id)
);
CREATE INDEX imv2_pending_order ON imv2_pending (channel_id, seq);

CREATE SEQUENCE imv2_completed_seq;
CREATE TABLE imv2_completed (
	channel_id  bytea  NOT NULL,
	message_id  bytea  NOT NULL,
	fingerprint bytea  NOT NULL,
	recorded_ns bigint NOT NULL,
	seq         bigint NOT NULL,
	PRIMARY KEY (channel_id, message_id)
);
CREATE INDEX imv2_completed_order ON imv2_completed (seq);

CREATE TABLE imv2_completed_count (
	id int PRIMARY KEY CHECK (id = 1),
	n  bigint NOT NULL
);
INSERT INTO imv2_completed_count VALUES (1, 0);

CREATE TABLE imv2_claims (
	channel_id  bytea  NOT NULL,
	message_id  bytea  NOT NULL,
	owner       text   NOT NULL,
	until_ns    bigint NOT NULL,
	fingerprint bytea  NOT NULL,
	PRIMARY KEY (channel_id, message_id)
);
CREATE INDEX imv2_claims_until ON imv2_claims (until_ns);

CREATE TABLE imv2_channels (
	channel_id bytea PRIMARY KEY
);
`,
	// 2: connector_ids and when each was last seen by any replica
	// (connectors.go), so a hello to any replica keeps its connector_id.
	`
CREATE TABLE imv2_connectors (
	connector_id bytea  PRIMARY KEY,
	seen_ns      bigint NOT NULL
);
CREATE INDEX imv2_connectors_seen ON imv2_connectors (seen_ns);
`,
	// 3: the Connector kit's conversation bindings (binding.go), one per
	// channel, and the per-key reference counts the kit releases a
	// conversation on.
	`
CREATE TABLE imv2_bindings (
	channel_id   bytea  PRIMARY KEY,
	key          bytea  NOT NULL,
	provider     bytea  NOT NULL,
	label        bytea  NOT NULL,
	display_name bytea  NOT NULL,
	account_hint bytea  NOT NULL,
	state        text   NOT NULL,
	created_ms   bigint NOT NULL
);
CREATE INDEX imv2_bindings_key ON imv2_bindings (key, channel_id);

CREATE TABLE imv2_binding_keys (
	key bytea  PRIMARY KEY,
	n   bigint NOT NULL CHECK (n > 0)
);
`,
	// 4: a binding's platform-private data and its draft handles (message
	// IDs and handles as two arrays of one length, oldest first); rows of
	// version 3 get none.
	`
ALTER TABLE imv2_bindings
	ADD COLUMN data          bytea   NOT NULL DEFAULT '\x',
	ADD COLUMN draft_ids     bytea[] NOT NULL DEFAULT '{}',
	ADD COLUMN draft_handles bytea[] NOT NULL DEFAULT '{}';
`,
	// 5: the completed count split over 64 rows (completed.go), so
	// Records of different messages wait on no common row; the old
	// count moves to shard 0. Written to run again harmlessly.
	`
CREATE TABLE IF NOT EXISTS imv2_completed_counts (
	shard int    PRIMARY KEY CHECK (shard >= 0 AND shard < 64),
	n     bigint NOT NULL
);
INSERT INTO imv2_completed_counts SELECT g, 0 FROM generate_series(0, 63) g ON CONFLICT DO NOTHING;
DO $$ BEGIN
	IF to_regclass('imv2_completed_count') IS NOT NULL THEN
		UPDATE imv2_completed_counts SET n = n + (SELECT n FROM imv2_completed_count WHERE id = 1) WHERE shard = 0;
		DROP TABLE imv2_completed_count;
	END IF;
END $$;
`,
	// 6: completed records counted per channel, and the channels holding
	// records counted on the shard rows, for the shares of
	// completedshare.go; a channel's records in order. Counted from the
	// records at hand. Written to run again harmlessly.
	`
CREATE TABLE IF NOT EXISTS imv2_completed_channels (
	channel_id bytea  PRIMARY KEY,
	n          bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS imv2_completed_channels_n ON imv2_completed_channels (n);
CREATE INDEX IF NOT EXISTS imv2_completed_channel_order ON imv2_completed (channel_id, seq);
ALTER TABLE imv2_completed_counts ADD COLUMN IF NOT EXISTS channels bigint NOT NULL DEFAULT 0;
DELETE FROM imv2_completed_channels;
INSERT INTO imv2_completed_channels SELECT channel_id, count(*) FROM imv2_completed GROUP BY channel_id;
UPDATE imv2_completed_counts SET channels = CASE WHEN shard = 0 THEN (SELECT count(*) FROM imv2_completed_channels) ELSE 0 END;
`,
	// 7: a channel's group (its records' connector_id; empty: none) and
	// each group's channels, counted on rows per count shard (a group's
	// channels are the sum of its rows), for the two-level shares of
	// completedshare.go. Channels of version 6 go to the group of none.
	// Counted from the rows at hand; written to run again harmlessly.
	`
CREATE TABLE IF NOT EXISTS imv2_completed_groups (
	connector_id bytea  NOT NULL,
	shard        int    NOT NULL,
	channels     bigint NOT NULL,
	PRIMARY KEY (connector_id, shard)
);
ALTER TABLE imv2_completed_channels ADD COLUMN IF NOT EXISTS connector_id bytea NOT NULL DEFAULT '\x';
CREATE INDEX IF NOT EXISTS imv2_completed_channels_group ON imv2_completed_channels (connector_id, n);
DELETE FROM imv2_completed_groups;
INSERT INTO imv2_completed_groups SELECT connector_id, 0, count(*) FROM imv2_completed_channels GROUP BY connector_id;
`,
	// 8: a result kept with a completed record (state.ResultStore: a tool
	// call's answer, W13; at most state.MaxResultBytes), NULL for none: in
	// the record's row, so it goes with the record however the record
	// goes. Records of version 7 have none.
	`
ALTER TABLE imv2_completed ADD COLUMN IF NOT EXISTS result bytea;
`,
	// 9: the owner of a claim whose post has not begun (imv2.ClaimStarter,
	// claim.go). NULL, the default, reads as begun, the safe side: a claim
	// written by a replica of version 8 or older during a rolling upgrade, or one
	// taken over by such a replica (the owner changes, unposted_by does
	// not, and they no longer match). No rewrite of the table.
	`
ALTER TABLE imv2_claims ADD COLUMN IF NOT EXISTS unposted_by text;
`,
	// 10: the xAgent side's state.ChannelStore (xagent.go): the channel
	// IDs to reopen in the order added, and the connector_id of the last
	// hello.ack (one row). Written to run again harmlessly.
	`
CREATE TABLE IF NOT EXISTS imv2_xagent_channels (
	channel_id bytea  PRIMARY KEY,
	seq        bigint GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX IF NOT EXISTS imv2_xagent_channels_order ON imv2_xagent_channels (seq);
CREATE TABLE IF NOT EXISTS imv2_xagent_connector (
	id           int   PRIMARY KEY CHECK (id = 1),
	connector_id bytea NOT NULL
);
`,
}

// SchemaVersion is the schema version this build writes and reads.
const SchemaVersion = len(migrations)

// schemaLock is the advisory lock key that serialises migrations, so two
// replicas starting at once migrate once.
const schemaLock = 0x696d76325f736368 // "imv2_sch"

// migrate brings the database to SchemaVersion in one transaction under
// an advisory lock: a replica that starts while another migrates waits,
// then finds the work done. A database newer than this build is refused,
// since this build cannot know what the newer schema means.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS imv2_schema_version (
			version    int PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM imv2_schema_version").Scan(&have); err != nil {
			return err
		}
		if have > len(migrations) {
			return fmt.Errorf("database schema version %d is newer than this build's %d", have, len(migrations))
		}
		for v := have; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migration to version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO imv2_schema_version (version) VALUES ($1)", v+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: schema: %w", err)
	}
	return nil
}
