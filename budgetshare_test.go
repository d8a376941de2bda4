package imv2

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBudget_PooledChildrenKeepTheirFloors: under a pooled budget,
// children beyond their floors take at most limit-keep together, so
// another child can always take its floor. Under a plain NewBudget
// parent (as before pooled budgets), a and b take the whole parent and c
// gets nothing.
func TestBudget_PooledChildrenKeepTheirFloors(t *testing.T) {
	root := NewPooledBudget(100, 10, 4, nil) // keeps 40
	a, b, c := NewBudget(100, root), NewBudget(100, root), NewBudget(100, root)
	require.True(t, a.reserve(70), "its floor and the whole pool (60)")
	require.False(t, a.reserve(1), "the pool is spent")
	require.False(t, b.reserve(11), "b's floor, no more")
	require.True(t, b.reserve(10))
	require.True(t, c.reserve(10), "c's floor is there, whatever a and b took")
	require.Equal(t, int64(90), root.Used())
	grand := NewBudget(0, c) // a plain grandchild: c's bounds
	require.False(t, grand.reserve(1), "c is at its floor and the pool is spent")

	a.release(70)
	require.True(t, grand.reserve(30))
	grand.release(30)
	b.release(10)
	c.release(10)
	require.Zero(t, root.Used())
	require.Zero(t, root.above.Load())
}

// TestBudget_PooledStaysExactUnderConcurrency: children reserving and
// releasing concurrently, many refused, leave the parent's accounting at
// zero once everything is released (-race).
func TestBudget_PooledStaysExactUnderConcurrency(t *testing.T) {
	root := NewPooledBudget(1000, 50, 8, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		s := NewBudget(300, root)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			var held []int64
			for range 5000 {
				if len(held) > 0 && r.IntN(2) == 0 {
					s.release(held[len(held)-1])
					held = held[:len(held)-1]
					continue
				}
				if n := int64(1 + r.IntN(60)); s.reserve(n) {
					held = append(held, n)
				}
			}
			for _, n := range held {
				s.release(n)
			}
		}()
	}
	wg.Wait()
	require.Zero(t, root.Used())
	require.Zero(t, root.above.Load())
}
