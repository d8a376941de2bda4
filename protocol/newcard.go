package protocol

import (
	"runtime/debug"
	"slices"

	"github.com/xagentkit/imv2"
)

// NewCard returns the Card of a Connector for the IM profile: its
// connector_card_id, its name and version, and the targets it supports,
// with the rest filled in as almost every Connector fills it:
//
//   - schema and protocol_version: this package's (H1);
//   - supports.target_types: the targets' types, in order, each once;
//   - supports.profiles: [xagent.im.v2] (P1);
//   - build: version, and the VCS revision and commit time the Go
//     toolchain stamped into the binary; a build without them (go test, a
//     tree without VCS) says build_time "unknown".
//
// The Card is a plain value: set Tools, AuthFlows, UI or Security on it
// before passing it on, or write the struct (or an embedded card.json
// through DecodeCard) when it needs more. connector.New validates it.
//
//	card := protocol.NewCard("im.pretend", "Pretend chat", "1.0.0",
//		protocol.SupportedTarget{TargetType: imv2.TargetTypeIM, Provider: "pretend", Label: "Pretend chat"})
func NewCard(id, name, version string, targets ...SupportedTarget) *Card {
	info, ok := debug.ReadBuildInfo()
	c := &Card{
		Schema:          CardSchema,
		ProtocolVersion: ProtocolVersion,
		Build:           stampedBuild(version, info, ok),
		ConnectorCardID: id,
		Connector:       CardInfo{Name: name, Version: version},
		Supports: Supports{
			Targets:  slices.Clone(targets),
			Profiles: []string{imv2.ProfileIMv2},
		},
	}
	for _, t := range targets {
		if !slices.Contains(c.Supports.TargetTypes, t.TargetType) {
			c.Supports.TargetTypes = append(c.Supports.TargetTypes, t.TargetType)
		}
	}
	return c
}

// stampedBuild is the build member for version and what the toolchain
// recorded in the binary (info, when ok).
func stampedBuild(version string, info *debug.BuildInfo, ok bool) Build {
	b := Build{Version: version, BuildTime: "unknown"}
	if !ok {
		return b
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.GitRev = s.Value[:min(len(s.Value), 12)]
		case "vcs.time":
			b.BuildTime = s.Value
		}
	}
	return b
}
