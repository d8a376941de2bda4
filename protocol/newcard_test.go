package protocol

import (
	"encoding/json"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/xagentkit/imv2"
)

// TestNewCard_H1_P1_IsAValidIMCard: the Card NewCard fills in passes H1's
// checks as served and read back, declares the IM profile (P1) and names
// each target type once.
func TestNewCard_H1_P1_IsAValidIMCard(t *testing.T) {
	c := NewCard("im.pretend", "Pretend chat", "1.0.0",
		SupportedTarget{TargetType: imv2.TargetTypeIM, Provider: "pretend", Label: "Pretend chat"},
		SupportedTarget{TargetType: imv2.TargetTypeIM, Provider: "pretend-work", Label: "Pretend chat for work"})
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCard(raw)
	if err != nil {
		t.Fatalf("DecodeCard(%s): %v", raw, err)
	}
	if got := back.Supports.TargetTypes; !slices.Equal(got, []string{imv2.TargetTypeIM}) {
		t.Errorf("target_types %v, want [im]", got)
	}
	if got := back.Supports.Profiles; !slices.Equal(got, []string{imv2.ProfileIMv2}) {
		t.Errorf("profiles %v, want [%s]", got, imv2.ProfileIMv2)
	}
	if back.ConnectorCardID != "im.pretend" || back.Connector.Name != "Pretend chat" || back.Build.Version != "1.0.0" {
		t.Errorf("card %s lost what it was given", raw)
	}
}

// TestNewCard_H4_BuildFromTheBinary: the build member carries what the
// toolchain stamped (revision, commit time) and never a blank build_time,
// which H1 refuses.
func TestNewCard_H4_BuildFromTheBinary(t *testing.T) {
	stamped := &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"},
		{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
	}}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want Build
	}{
		{"stamped", stamped, true, Build{Version: "2.0.0", GitRev: "0123456789ab", BuildTime: "2026-12-01T10:00:00Z"}},
		{"unstamped", &debug.BuildInfo{}, true, Build{Version: "2.0.0", BuildTime: "unknown"}},
		{"no build info", nil, false, Build{Version: "2.0.0", BuildTime: "unknown"}},
	} {
		if got := stampedBuild("2.0.0", tc.info, tc.ok); got != tc.want {
			t.Errorf("%s: build %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
