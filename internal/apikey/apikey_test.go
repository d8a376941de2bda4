package apikey

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/xagentkit/imv2/fakeclock"
)

// TestToken_W1_Grammar is the table both the HTTP kit and the data plane
// rely on; the two-space row is the one the two used to disagree on.
func TestToken_W1_Grammar(t *testing.T) {
	for _, tc := range []struct {
		name, header, token string
		ok                  bool
	}{
		{"one_space", "Bearer K", "K", true},
		{"two_spaces", "Bearer  K", "K", true},
		{"many_spaces", "Bearer     K", "K", true},
		{"scheme_case_insensitive", "bEARER K", "K", true},
		{"token_verbatim", "Bearer a.b~c+/=", "a.b~c+/=", true},
		{"inner_space_kept", "Bearer a b", "a b", true},
		{"empty", "", "", false},
		{"scheme_only", "Bearer", "", false},
		{"scheme_and_spaces", "Bearer   ", "", false},
		{"tab_separator", "Bearer\tK", "", false},
		{"no_separator", "BearerK", "", false},
		{"other_scheme", "Basic K", "", false},
		{"longer_scheme", "Bearerx K", "", false},
		{"token_alone", "K", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token, ok := Token(tc.header)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.token, token)
		})
	}
}

func TestKey_W1_Allow(t *testing.T) {
	k := New("s3cret")
	assert.True(t, k.Set())
	for header, want := range map[string]bool{
		"Bearer s3cret":   true,
		"Bearer  s3cret":  true,
		"bearer s3cret":   true,
		"Bearer s3cre":    false,
		"Bearer s3cretx":  false,
		"Bearer":          false,
		"s3cret":          false,
		"Basic s3cret":    false,
		"Bearer\ts3cret":  false,
		"":                false,
		"Bearer  s3cret ": false, // net/http trims the field; a raw trailing space is part of the token
	} {
		assert.Equal(t, want, k.Allow(header), "%q", header)
	}
	var unset Key
	assert.False(t, unset.Set())
	assert.True(t, unset.Allow(""), "no key configured lets every request through")
	assert.False(t, New("").Set())
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"Bearer K", "Bearer  K", "bearer", "Basic x", "Bearer\tK", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		token, ok := Token(h)
		if !ok {
			if token != "" {
				t.Fatalf("refused %q but returned %q", h, token)
			}
			return
		}
		if token == "" || token[0] == ' ' || len(token) >= len(h) {
			t.Fatalf("Token(%q) = %q", h, token)
		}
		if !New(token).Allow(h) {
			t.Fatalf("the key %q does not allow its own header %q", token, h)
		}
	})
}

// TestKey_RotateKeepsThePreviousForTheGrace: after Rotate the new key
// passes, the previous one until its grace ends on the Key's clock, and a
// copy of the Key shares the rotation; an unset Key cannot be rotated.
func TestKey_RotateKeepsThePreviousForTheGrace(t *testing.T) {
	clk := fakeclock.New(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	k := New("old-key").WithClock(clk)
	copied := k
	assert.NoError(t, k.Rotate("new-key", time.Minute))
	for _, key := range []Key{k, copied} {
		assert.True(t, key.Allow("Bearer new-key"))
		assert.True(t, key.Allow("Bearer old-key"))
		assert.False(t, key.Allow("Bearer other"))
	}
	clk.Advance(time.Minute)
	assert.False(t, k.Allow("Bearer old-key"))
	assert.True(t, k.Allow("Bearer new-key"))
	assert.NoError(t, k.Rotate("new-key", time.Minute), "the same key again")
	assert.False(t, k.Allow("Bearer old-key"), "a repeated rotation revives no older key")
	assert.Error(t, k.Rotate("", time.Minute))
	assert.Error(t, Key{}.Rotate("k", time.Minute))
	assert.True(t, Key{}.Allow(""), "unset allows all")
}
