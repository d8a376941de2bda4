package pgstore

import (
	"strings"
	"testing"
)

// FuzzParseNotice: any payload is read without a panic; what it accepts
// names a valid channel ID, and every notice a Store writes reads back.
func FuzzParseNotice(f *testing.F) {
	s := &Store{id: "3f1c2a9e-5d7b-4c1e-9a0f-6b2d8e4c1a77"}
	for _, seed := range []string{s.notice("cch_1"), s.notice("x"), "", " ", "a b", "a zz", "a " + strings.Repeat("41", 300), "no-space"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		from, id, ok := parseNotice(payload)
		if !ok {
			return
		}
		if from == "" || checkChannel(id) != nil {
			t.Fatalf("accepted %q: from %q, channel %q", payload, from, id)
		}
		if from == s.id {
			return
		}
		s2 := &Store{id: from}
		if strings.Contains(from, " ") {
			return // not a Store's ID
		}
		if f2, id2, ok := parseNotice(s2.notice(id)); !ok || f2 != from || id2 != id {
			t.Fatalf("round trip of %q: %q %q %v", payload, f2, id2, ok)
		}
	})
}

// TestParseNotice_RefusesForeignPayloads: broken fixtures, each refused.
func TestParseNotice_RefusesForeignPayloads(t *testing.T) {
	for _, p := range []string{"", "nospace", " 6363", "a zz", "a ", "a 00", "a " + strings.Repeat("41", 257)} {
		if _, _, ok := parseNotice(p); ok {
			t.Errorf("parseNotice(%q) accepted", p)
		}
	}
	s := &Store{id: "me"}
	if from, id, ok := parseNotice(s.notice("cch_1")); !ok || from != "me" || id != "cch_1" {
		t.Errorf("own notice: %q %q %v", from, id, ok)
	}
}
