package fastjson

import "math"

// IntegralNumber returns the value of b, a number of valid JSON syntax,
// when it is an integer that fits an int64: an exponent and a fraction of
// zeros are fine, "-0" is 0; a non-zero fraction or a value out of range
// is not. It is exact (no float rounding) and does not allocate.
func IntegralNumber(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	// Split digits [intPart][frac] and the exponent.
	mant, exp := b, 0
	for i, c := range b {
		if c == 'e' || c == 'E' {
			mant = b[:i]
			e := b[i+1:]
			eneg := len(e) > 0 && e[0] == '-'
			if len(e) > 0 && (e[0] == '-' || e[0] == '+') {
				e = e[1:]
			}
			for _, d := range e {
				if exp < 1_000_000 { // beyond, the verdict no longer changes
					exp = exp*10 + int(d-'0')
				}
			}
			if eneg {
				exp = -exp
			}
			break
		}
	}
	intPart, frac := mant, mant[:0]
	for i, c := range mant {
		if c == '.' {
			intPart, frac = mant[:i], mant[i+1:]
			break
		}
	}
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	for len(intPart) > 0 && intPart[0] == '0' {
		intPart = intPart[1:]
	}
	if len(intPart) == 0 { // leading zeros of the fraction are leading zeros
		for len(frac) > 0 && frac[0] == '0' {
			frac = frac[1:]
			exp--
		}
	}
	// The value is digits(intPart+frac) × 10^(exp-len(frac)).
	nd := len(intPart) + len(frac)
	if nd == 0 {
		return 0, true
	}
	scale := exp - len(frac)
	// Trailing zeros of the digits may pay for a negative scale.
	tz := 0
	if len(frac) == 0 {
		for tz < len(intPart) && intPart[len(intPart)-1-tz] == '0' {
			tz++
		}
	}
	if scale < 0 {
		if -scale > tz {
			return 0, false // a non-zero fraction
		}
		nd += scale
		scale = 0
	}
	if nd+scale > 19 {
		return 0, false
	}
	var v uint64
	for i := 0; i < nd; i++ {
		var c byte
		if i < len(intPart) {
			c = intPart[i]
		} else {
			c = frac[i-len(intPart)]
		}
		v = v*10 + uint64(c-'0')
	}
	for range scale {
		v *= 10
	}
	switch {
	case !neg && v > math.MaxInt64, neg && v > -math.MinInt64:
		return 0, false
	case neg:
		return -int64(v), true
	}
	return int64(v), true
}
