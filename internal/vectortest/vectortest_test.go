package vectortest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xagentkit/imv2"
)

// recorder is a testing.TB that records failures; its Fatalf stops the
// check under test by panicking with stop, as t.Fatalf would by Goexit.
type recorder struct {
	testing.TB
	failed bool
}

type stop struct{}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; panic(stop{}) }
func (r *recorder) Fatal(...any)          { r.failed = true; panic(stop{}) }

// fails reports whether check failed the recorder it was given.
func fails(t *testing.T, check func(tb testing.TB)) bool {
	t.Helper()
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(stop); !ok {
					panic(p)
				}
			}
		}()
		check(r)
	}()
	return r.failed
}

func TestCheckRefused(t *testing.T) {
	v := Vector{File: "card/bad.json", Expect: string(imv2.CodeInvalidPacket), Message: "tool_id is empty"}
	right := &imv2.Error{Code: imv2.CodeInvalidPacket, Message: "connector card: tools[0].tool_id is empty (H2)"}
	if fails(t, func(tb testing.TB) { CheckRefused(tb, v, right) }) {
		t.Fatal("the expected refusal failed the check")
	}
	for name, err := range map[string]error{
		"none":          nil,
		"other code":    &imv2.Error{Code: imv2.CodeUnsupportedPacket, Message: right.Message},
		"other message": &imv2.Error{Code: imv2.CodeInvalidPacket, Message: "connector card: connector.name is empty (H1)"},
		"no message":    &imv2.Error{Code: imv2.CodeInvalidPacket},
	} {
		if !fails(t, func(tb testing.TB) { CheckRefused(tb, v, err) }) {
			t.Errorf("%s: passed the check", name)
		}
	}
}

func TestCheckManifest(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.json", "b.json"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a := Vector{File: "a.json", Kind: "card", Expect: "ok", Rules: []string{"H1"}, Note: "a"}
	b := Vector{File: "b.json", Kind: "card", Expect: "invalid_packet", Message: "x", Rules: []string{"H1"}, Note: "b"}
	if fails(t, func(tb testing.TB) { CheckManifest(tb, dir, []Vector{a, b}) }) {
		t.Fatal("a sound manifest failed the check")
	}
	noRules, badRule, okMessage, missing := b, b, a, b
	noRules.Rules = nil
	badRule.Rules = []string{"PROTO4"}
	okMessage.Message = "x"
	missing.File = "c.json"
	for name, vs := range map[string][]Vector{
		"unlisted file":        {a},
		"listed twice":         {a, b, b},
		"no file":              {a, b, missing},
		"no rules":             {a, noRules},
		"not a rule ID":        {a, badRule},
		"message on a valid":   {okMessage, b},
		"no note or no expect": {a, {File: "b.json", Rules: []string{"H1"}}},
	} {
		if !fails(t, func(tb testing.TB) { CheckManifest(tb, dir, vs) }) {
			t.Errorf("%s: passed the check", name)
		}
	}
}
