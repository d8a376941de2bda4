// Package vectortest reads the SDK's golden vectors: a testdata/vectors
// directory of one packet, Card or Descriptor per file, described by its
// manifest.json. The root package (the envelope and the IM v2 payloads)
// and package protocol (Card, Descriptor, Common Protocol payloads) each
// keep their own directory and share this reader and its checks.
package vectortest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/xagentkit/imv2"
)

// Vector is one manifest entry.
type Vector struct {
	File string `json:"file"`
	// Kind is packet, card or descriptor.
	Kind string `json:"kind"`
	// Direction is to_connector or to_xagent; IM v2 packets only.
	Direction string `json:"direction,omitempty"`
	// Expect is "ok", "dropped" (the negotiated catalog refuses the
	// packet's direction: P6) or the expected error code.
	Expect string `json:"expect"`
	// Message is a fragment the refusal's message must contain, so an
	// invalid vector cannot pass by failing for another reason.
	Message string `json:"message,omitempty"`
	// Rules are the requirement IDs the vector exercises.
	Rules []string `json:"rules"`
	// Schema false marks an invalid IM vector whose payload the JSON
	// Schema cannot judge (the rule lives in the envelope, the direction,
	// or needs unique-by-member); its payload must then pass the schema.
	Schema *bool `json:"schema,omitempty"`
	// Card is the Card file a descriptor's cross rules are checked against.
	Card string `json:"card,omitempty"`
	Note string `json:"note"`
}

// Name is the vector's subtest name: its rule IDs, then its file without
// slashes (a slash would nest subtests and confuse -run).
func (v Vector) Name() string {
	return strings.Join(v.Rules, "_") + "__" + strings.ReplaceAll(strings.TrimSuffix(v.File, ".json"), "/", "_")
}

// Load returns the vectors of dir/manifest.json. A member the Vector
// type does not know fails tb, so a typo cannot switch a check off.
func Load(tb testing.TB, dir string) []Vector {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var m struct {
		Vectors []Vector `json:"vectors"`
	}
	if err := jsonv2.Unmarshal(data, &m, jsonv2.RejectUnknownMembers(true)); err != nil {
		tb.Fatalf("%s/manifest.json: %v", dir, err)
	}
	return m.Vectors
}

// Read returns the bytes of the vector file (a manifest path) under dir.
func Read(tb testing.TB, dir, file string) []byte {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

var ruleID = regexp.MustCompile(`^[PIEMDACSXWHTK][1-9][0-9]*$`)

// CheckManifest fails t when a file under dir is not in the manifest, an
// entry is listed twice or has no file, or an entry lacks rule IDs, an
// expectation or a note.
func CheckManifest(t testing.TB, dir string, vectors []Vector) {
	t.Helper()
	listed := map[string]bool{}
	for _, v := range vectors {
		if listed[v.File] {
			t.Errorf("%s: listed twice", v.File)
		}
		listed[v.File] = true
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(v.File))); err != nil {
			t.Errorf("%s: manifest entry without a file: %v", v.File, err)
		}
		if len(v.Rules) == 0 {
			t.Errorf("%s: no rule IDs", v.File)
		}
		for _, r := range v.Rules {
			if !ruleID.MatchString(r) {
				t.Errorf("%s: %q is not a rule ID", v.File, r)
			}
		}
		if v.Expect == "" || v.Note == "" {
			t.Errorf("%s: expect and note are required", v.File)
		}
		if v.Expect == "ok" && v.Message != "" {
			t.Errorf("%s: a message fragment on a valid vector", v.File)
		}
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, dir+string(filepath.Separator)))
		if rel != "manifest.json" && !listed[rel] {
			t.Errorf("%s: vector file not in the manifest", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// CheckRefused fails t unless err is the refusal v expects: an *imv2.Error
// with v.Expect as its code and a message that contains v.Message.
func CheckRefused(t testing.TB, v Vector, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s, got none (%s)", v.Expect, v.Note)
	}
	if !errors.Is(err, &imv2.Error{Code: imv2.Code(v.Expect)}) {
		t.Fatalf("want error %s, got %v (%s)", v.Expect, err, v.Note)
	}
	var e *imv2.Error
	if !errors.As(err, &e) || e.Message == "" {
		t.Fatalf("error %v has no message", err)
	}
	if !strings.Contains(e.Message, v.Message) {
		t.Fatalf("want a message containing %q, got %q (%s)", v.Message, e.Message, v.Note)
	}
}

// MustBeSDKError fails t unless err is an *imv2.Error with a code and a
// message: what every decoder returns for bad input, fuzzed or not.
func MustBeSDKError(t testing.TB, err error) {
	t.Helper()
	var e *imv2.Error
	if !errors.As(err, &e) || e.Code == "" || e.Message == "" {
		t.Fatalf("error %v (%T) is not an *imv2.Error with code and message", err, err)
	}
}

// Seeds adds to f the bytes of every vector under dir of the given kind
// whose envelope type is typ (any type when typ is ""), as args(data, v).
// It fails f when no vector matches, so a fuzz target cannot lose its
// seeds unnoticed.
func Seeds(f *testing.F, dir, kind, typ string, args func(data []byte, v Vector) []any) {
	f.Helper()
	n := 0
	for _, v := range Load(f, dir) {
		if v.Kind != kind {
			continue
		}
		data := Read(f, dir, v.File)
		if typ != "" {
			var head struct {
				Type string `json:"type"`
			}
			if jsonv2.Unmarshal(data, &head) != nil || head.Type != typ {
				continue
			}
		}
		f.Add(args(data, v)...)
		n++
	}
	if n == 0 {
		f.Fatalf("no %s seed of type %q in %s", kind, typ, dir)
	}
}

// DataOnly is the args of Seeds for a target that takes the bytes alone.
func DataOnly(data []byte, _ Vector) []any { return []any{data} }
