package imv2

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBudget_SharesKeepTheirFloors: in a pooled budget, shares beyond
// their floors take at most limit-keep together, so another share can
// always take its floor; a share past the keep gets no floor, and Retire
// gives a floor back. Before pooled budgets, two children could take the
// whole parent and the third got nothing.
func TestBudget_SharesKeepTheirFloors(t *testing.T) {
	root := NewPooledBudget(100, 40, nil)
	a, b, c := root.Share(100, 10), root.Share(100, 10), root.Share(100, 10)
	require.True(t, a.reserve(70), "its floor and the whole pool (60)")
	require.False(t, a.reserve(1), "the pool is spent")
	require.False(t, b.reserve(11), "b's floor, no more")
	require.True(t, b.reserve(10))
	require.True(t, c.reserve(10), "c's floor is there, whatever a and b took")
	require.Equal(t, int64(90), root.Used())

	d := root.Share(100, 20) // 30+20 > 40: no floor
	require.False(t, d.reserve(1))
	a.Retire()
	e := root.Share(100, 20) // 20+20 ≤ 40
	require.True(t, e.reserve(10), "a retired floor serves a new share (the budget has 10 left)")

	a.release(70)
	b.release(10)
	c.release(10)
	e.release(10)
	require.Zero(t, root.Used())
	require.Zero(t, root.above.Load())
}

// TestBudget_SharesStayExactUnderConcurrency: shares reserving and
// releasing concurrently, many refused, leave the parent's accounting at
// zero once everything is released (-race).
func TestBudget_SharesStayExactUnderConcurrency(t *testing.T) {
	root := NewPooledBudget(1000, 400, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		s := root.Share(300, 50)
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
