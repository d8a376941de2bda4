package apikey

import (
	"fmt"
	"math"
	"strings"
)

// MinBits is the estimated strength (Bits) a key must have. A key
// generated at random (16 bytes as base64, 22 characters, or as hex)
// scores about 120 to 130 and never under 89 in 200,000 draws; 80 leaves
// room for the repeats and runs such a key holds by chance, while a
// repeated character, a run (abc, 123), common words or a repeated
// chunk, however long, stays below.
const MinBits = 80

// Bits estimates a key's strength in bits, as a guesser who tries
// repeats, runs and common words first would count it: each character
// costs log2 of the alphabet its classes span (lower case, upper case,
// digits, the rest: 26, 26, 10, 33), except that a character repeating
// or continuing the one before (aa, ab, ba) costs 1 bit, a common word
// of four letters or more at that place (compared in lower case, with
// 0→o, 1→l, 3→e, 4→a, 5→s, 7→t, @→a, $→s) costs one choice among the
// word list (and 1 bit for its case), and a chunk of three characters or
// more seen earlier in the key costs one choice of where it was seen.
func Bits(key string) float64 {
	pool := 0
	var lower, upper, digit, other bool
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z':
			lower = true
		case 'A' <= c && c <= 'Z':
			upper = true
		case '0' <= c && c <= '9':
			digit = true
		default:
			other = true
		}
	}
	for _, class := range []struct {
		in   bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}} {
		if class.in {
			pool += class.size
		}
	}
	perChar := math.Log2(float64(max(pool, 2)))
	folded := fold(key)
	wordBits := math.Log2(float64(len(commonWords))) + 1
	var bits float64
	for i := 0; i < len(key); {
		if n := wordAt(folded, i); n > 0 {
			bits += wordBits
			i += n
			continue
		}
		if n := repeatAt(key, i); n > 0 {
			bits += math.Log2(float64(i)) + 1
			i += n
			continue
		}
		if i > 0 && (key[i] == key[i-1] || key[i] == key[i-1]+1 || key[i]+1 == key[i-1]) {
			bits++
		} else {
			bits += perChar
		}
		i++
	}
	return bits
}

// CheckStrength refuses a key under MinBits, saying why.
func CheckStrength(key string) error {
	if b := Bits(key); b < MinBits {
		return fmt.Errorf("the API key is guessable: about %.0f bits of strength, under %d (a repeated character, a run such as abc or 123, a common word or a repeated chunk counts for little however long); generate one, e.g. openssl rand -base64 32", b, MinBits)
	}
	return nil
}

// fold lowers key's ASCII letters and reads common digit and symbol
// substitutions as the letters they stand for.
func fold(key string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '0':
			return 'o'
		case '1':
			return 'l'
		case '3':
			return 'e'
		case '4', '@':
			return 'a'
		case '5', '$':
			return 's'
		case '7':
			return 't'
		}
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, key)
}

// wordAt returns the length of the longest common word at folded[i:], 0
// for none.
func wordAt(folded string, i int) int {
	n := 0
	for _, w := range commonWords {
		if len(w) > n && strings.HasPrefix(folded[i:], w) {
			n = len(w)
		}
	}
	return n
}

// repeatAt returns the length of the longest chunk of three bytes or more
// at key[i:] that also starts before i, 0 for none. The scan is bounded:
// a key is at most a few KiB (the key file's bound).
func repeatAt(key string, i int) int {
	best := 0
	for j := 0; j < i; j++ {
		n := 0
		for i+n < len(key) && key[j+n] == key[i+n] {
			n++
		}
		best = max(best, n)
	}
	if best < 3 {
		return 0
	}
	return best
}
