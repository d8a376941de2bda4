package pgtest

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestWithDatabase: the database a test gets is the one pgx connects to,
// whichever form IMV2_PG_URL takes.
func TestWithDatabase(t *testing.T) {
	for _, conn := range []string{
		"postgres://u@127.0.0.1:5432/postgres?sslmode=disable",
		"postgres://u@127.0.0.1:5432/postgres",
		"postgresql://u@127.0.0.1:5432",
		"host=127.0.0.1 port=5432 user=u dbname=postgres sslmode=disable",
		"host=/tmp/sock user=u",
	} {
		cfg, err := pgx.ParseConfig(withDatabase(conn, "t_1_2"))
		if err != nil {
			t.Fatalf("%q: %v", conn, err)
		}
		if cfg.Database != "t_1_2" {
			t.Errorf("%q: database %q, want t_1_2", conn, cfg.Database)
		}
	}
}
