// Package defaults fills unset configuration fields. An Options struct of
// the SDK documents a default for each field; a zero or negative number,
// or an empty string, takes it. The root package keeps its own two-line
// copies, since it imports nothing of the SDK but clock.
package defaults

// Number is a configuration number (a count, a size, a time.Duration)
// that is unset when ≤ 0.
type Number interface {
	~int | ~int64
}

// Set stores def in *p when *p is unset (≤ 0).
func Set[T Number](p *T, def T) {
	if *p <= 0 {
		*p = def
	}
}

// Or returns v, or def when v is the zero value.
func Or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
