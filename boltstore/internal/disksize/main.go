// Command disksize measures the bbolt file that boltstore writes for n
// completed records, recorded one Record (one fsynced transaction) at a
// time as a receiver would, then again after another n records have churned
// through the default cap of 100,000.
//
//	go run ./boltstore/internal/disksize -n 100000 -dir /dev/shm
//
// The file's size does not depend on where it lives; a tmpfs -dir only
// makes the fsyncs free so the run takes seconds, not minutes.
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/boltstore"
)

func main() {
	n := flag.Int("n", 100_000, "completed records per round")
	channels := flag.Int("channels", 100, "channels the records spread over")
	dir := flag.String("dir", os.TempDir(), "directory for the temporary database")
	flag.Parse()
	if err := run(*n, *channels, *dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func run(n, channels int, dir string) error {
	tmp, err := os.MkdirTemp(dir, "disksize")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	path := filepath.Join(tmp, "imv2.db")
	s, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()

	ctx := context.Background()
	next := 0
	rng := rand.New(rand.NewPCG(1, 2)) // fixed seed: the same IDs every run
	round := func(label string) error {
		start := time.Now()
		for range n {
			// A 27-byte channel ID and a random message ID shaped like
			// imv2.NewMessageID's ("msg_" + UUID, 40 bytes).
			ch := fmt.Sprintf("telegram:chat:-100%09d", next%channels)
			id := fmt.Sprintf("msg_%08x-%04x-4%03x-%04x-%012x", rng.Uint32(), rng.Uint32N(1<<16),
				rng.Uint32N(1<<12), rng.Uint32N(1<<16), rng.Uint64N(1<<48))
			fp := imv2.Fingerprint(sha256.Sum256([]byte(id)))
			if err := s.Record(ctx, ch, id, fp); err != nil {
				return err
			}
			next++
		}
		st, err := s.Stats(ctx)
		if err != nil {
			return err
		}
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		// bbolt grows the file in 16 MiB steps; FileBytes is the part
		// its pages use.
		fmt.Printf("%-26s %6d records  pages %5.1f MiB (%3.0f B/record)  file %5.1f MiB  %v\n",
			label, st.Completed, mib(st.FileBytes), float64(st.FileBytes)/float64(st.Completed),
			mib(fi.Size()), time.Since(start).Round(time.Millisecond))
		return nil
	}
	if err := round(fmt.Sprintf("after %d records:", n)); err != nil {
		return err
	}
	return round(fmt.Sprintf("after %d more (churn):", n))
}
