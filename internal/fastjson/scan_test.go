package fastjson

import (
	"bytes"
	"encoding/binary"
	"math/big"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// integralOracle is IntegralNumber's independent reference: exact rational
// arithmetic.
func integralOracle(b string) (int64, bool) {
	r, ok := new(big.Rat).SetString(b)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

// TestIntegralNumber_MatchesBigRat: time and any integer read in any JSON
// notation (1790000000000, 1.79e12, 1790000000000.0) agree with exact
// rational arithmetic; fractions and out-of-range values are refused.
func TestIntegralNumber_MatchesBigRat(t *testing.T) {
	for _, c := range []string{"0", "-0", "1", "-1", "1790000000000", "1.79e12", "1790000000000.0", "1.79E+12",
		"17900000000000e-1", "0.000179e16", "1790000000000.5", "1.5", "0.5e1", "0.05e2", "5e-1", "1500e-2", "1501e-2",
		"0e999999999", "0.0e-99", "1e18", "1e19", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"-9223372036854775809", "9.223372036854775807e18", "92233720368547758070e-1", "1e-999999999", "100000000000000000000e-2"} {
		got, gok := IntegralNumber([]byte(c))
		want, wok := integralOracle(c)
		if got != want || gok != wok {
			t.Errorf("IntegralNumber(%s) = %d, %v; want %d, %v", c, got, gok, want, wok)
		}
	}
	// Exponents beyond big.Rat's range.
	for c, want := range map[string]bool{"0e10000000000000000000": true, "1e10000000000000000000": false, "1e-10000000000000000000": false, "-0.0e-10000000000000000000": true} {
		if v, ok := IntegralNumber([]byte(c)); ok != want || v != 0 {
			t.Errorf("IntegralNumber(%s) = %d, %v; want 0, %v", c, v, ok, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		c := rapid.StringMatching(`-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?`).Draw(t, "n")
		got, gok := IntegralNumber([]byte(c))
		want, wok := integralOracle(c)
		if got != want || gok != wok {
			t.Fatalf("IntegralNumber(%s) = %d, %v; want %d, %v", c, got, gok, want, wok)
		}
	})
}

// FuzzIntegralNumber holds IntegralNumber to exact rational arithmetic on
// every input the JSON number grammar takes.
func FuzzIntegralNumber(f *testing.F) {
	for _, s := range []string{"1790000000000", "1.79e12", "1790000000000.0", "1.5", "-0", "9.223372036854775808e18", "0e99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc := New([]byte(s))
		if !sc.number() || sc.i != len(s) || len(s) > 64 {
			return
		}
		if _, ok := new(big.Rat).SetString(s); !ok {
			return // an exponent beyond big.Rat's range: the oracle has no answer
		}
		got, gok := IntegralNumber([]byte(s))
		want, wok := integralOracle(s)
		if got != want || gok != wok {
			t.Fatalf("IntegralNumber(%s) = %d, %v; want %d, %v", s, got, gok, want, wok)
		}
	})
}

// TestArena_BoundsItsArrays: one array never exceeds arenaMaxChunk, and a
// string past arenaMaxString goes to an array of its own.
func TestArena_BoundsItsArrays(t *testing.T) {
	var a arena
	big := bytes.Repeat([]byte("a"), arenaMaxString)
	for range 10 {
		if s := a.str(big, false, 1<<20); s != string(big) {
			t.Fatalf("str = %q", s)
		}
		if a.b.Cap() > arenaMaxChunk {
			t.Fatalf("an array of %d bytes, more than arenaMaxChunk", a.b.Cap())
		}
	}
	long := append(big, 'b')
	used := a.b.Len()
	if s := a.str(long, false, 1<<20); a.b.Len() != used || s != string(long) {
		t.Fatal("a string past arenaMaxString went into the arena")
	}
}

// TestPlain8_MatchesTable: the eight-byte test of str agrees with the
// byte table on every byte value at every position, and on random words.
func TestPlain8_MatchesTable(t *testing.T) {
	want := func(w [8]byte) bool {
		for _, c := range w {
			if !plainByte[c] {
				return false
			}
		}
		return true
	}
	check := func(w [8]byte) {
		if got := plain8(binary.LittleEndian.Uint64(w[:])); got != want(w) {
			t.Fatalf("plain8(%q) = %v, want %v", w, got, !got)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			for _, fill := range []byte{'a', ' ', '~', '!', '#', '[', ']', 0x7f} {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				check(w)
			}
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range 200000 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		check(w)
		for i := range w { // mostly plain words, where a miss would hide
			if r.IntN(8) != 0 {
				w[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		check(w)
	}
}
