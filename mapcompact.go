package imv2

// A Go map churned by inserts and deletes at a steady size keeps growing:
// a delete from a full group leaves a tombstone, the table reclaims only
// some of them and grows past the rest (internal/runtime/maps, Go 1.26).
// A memory store at its cap that records forever would grow with the
// number of messages it has seen, not the number it holds: a map of
// 10,000 (channel, message) keys churned so took 1.7 MiB after 100,000
// inserts, 2.1 MiB after 1,000,000 and 3.2 MiB after 3,000,000. The
// completed records have a table of their own (completedfifo.go); the
// smaller maps that churn (claims, and channels coming and going) are
// rebuilt at their size once they have seen compactEvery removals per
// entry they hold, plus compactSlack: O(1) per removal amortised, and
// their size stays within a constant of a fresh map's.
const (
	compactEvery = 4
	compactSlack = 1024
)

// churned reports whether a map of n entries that has seen removed
// removals since it was made is due for a rebuild.
func churned(removed, n int) bool { return removed > compactEvery*n+compactSlack }

// rebuilt returns a fresh map holding what m holds.
func rebuilt[K comparable, V any](m map[K]V) map[K]V {
	fresh := make(map[K]V, len(m))
	for k, v := range m {
		fresh[k] = v
	}
	return fresh
}
