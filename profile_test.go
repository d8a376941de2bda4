package imv2

import (
	"slices"
	"testing"
)

func TestNegotiate_P3_Intersection(t *testing.T) {
	cat := DefaultCatalog()
	cases := []struct {
		name                string
		supported, declared []string
		want                []string
	}{
		{"both offer im.v2", []string{"xagent.im.v1", ProfileIMv2}, []string{ProfileIMv2}, []string{ProfileIMv2}},
		{"hello lacks it", []string{"xagent.im.v1"}, []string{ProfileIMv2}, nil},
		{"card lacks it", []string{ProfileIMv2}, []string{"xagent.device.v1"}, nil},
		{"nil supported enables nothing", nil, []string{ProfileIMv2}, nil},
		{"empty supported enables nothing", []string{}, []string{ProfileIMv2}, nil},
		{"nil declared enables nothing", []string{ProfileIMv2}, nil, nil},
		{"a profile outside the catalog is never enabled", []string{"xagent.device.v1"}, []string{"xagent.device.v1"}, nil},
		{"duplicates collapse", []string{ProfileIMv2, ProfileIMv2}, []string{ProfileIMv2}, []string{ProfileIMv2}},
	}
	for _, c := range cases {
		n := cat.Negotiate(c.supported, c.declared)
		if got := n.Profiles(); !slices.Equal(got, c.want) {
			t.Errorf("%s: profiles %v, want %v", c.name, got, c.want)
		}
		if n.has(ProfileIMv2) != (len(c.want) > 0) {
			t.Errorf("%s: Has(im.v2) = %v", c.name, n.has(ProfileIMv2))
		}
		if len(c.want) == 0 && (n.Allows(TypeChatMessage, ToXAgent) || n.MayProject(KindAssistantMessageFinal)) {
			t.Errorf("%s: nothing negotiated, yet something is allowed", c.name)
		}
	}
}

func TestNegotiated_P5_Equal(t *testing.T) {
	cat := DefaultCatalog()
	a := cat.Negotiate([]string{ProfileIMv2}, []string{ProfileIMv2})
	b := cat.Negotiate([]string{"xagent.im.v1", ProfileIMv2}, []string{ProfileIMv2, "x"})
	none := cat.Negotiate(nil, []string{ProfileIMv2})
	if !a.Equal(b) || !b.Equal(a) {
		t.Error("same enabled profiles are not Equal")
	}
	if a.Equal(none) || none.Equal(a) {
		t.Error("different enabled profiles are Equal: a channel would not reload")
	}
	var nilN *Negotiated
	if !none.Equal(nilN) || nilN.Allows(TypeChatMessage, ToConnector) || nilN.MayProject(KindAssistantActivity) || nilN.has(ProfileIMv2) {
		t.Error("a nil *Negotiated must allow nothing and equal the empty set")
	}
}

func TestNegotiated_P6_Allows(t *testing.T) {
	n := DefaultCatalog().Negotiate([]string{ProfileIMv2}, []string{ProfileIMv2})
	cases := []struct {
		typ  string
		dir  Direction
		want bool
	}{
		{TypeChatMessage, ToConnector, true},
		{TypeChatMessage, ToXAgent, true},
		{TypeChatMessageAck, ToConnector, true},
		{TypeChatMessageAck, ToXAgent, true},
		{TypeChatMessageDelta, ToConnector, true},
		{TypeChatMessageDelta, ToXAgent, false}, // D1: a Connector never sends deltas
		{TypeChatActivity, ToConnector, true},
		{TypeChatActivity, ToXAgent, false}, // C1
		{"message.push", ToXAgent, false},   // legacy im.v1, not negotiated
		{"session.sync_message", ToConnector, false},
		{TypeChatMessage, 0, false},
	}
	for _, c := range cases {
		if got := n.Allows(c.typ, c.dir); got != c.want {
			t.Errorf("Allows(%s, %s) = %v, want %v", c.typ, c.dir, got, c.want)
		}
	}
}

func TestNegotiated_P7_MayProject(t *testing.T) {
	n := DefaultCatalog().Negotiate([]string{ProfileIMv2}, []string{ProfileIMv2})
	for _, k := range []string{"session.sync_request", "session.sync_message", "session.sync_end", "history.snapshot",
		"history.replay", "ui.projection", "assistant.message.new_internal_kind", ""} {
		if n.MayProject(k) {
			t.Errorf("MayProject(%q) = true: internal signals must never reach the wire", k)
		}
	}
	for k, typ := range imv2Entry().Projections {
		if !n.MayProject(k) {
			t.Errorf("MayProject(%q) = false for a catalog kind", k)
		}
		if got, ok := n.projection(k); !ok || got != typ || !n.Allows(got, ToConnector) {
			t.Errorf("Projection(%q) = %q, %v; want %q, a packet allowed toward the Connector", k, got, ok, typ)
		}
	}
	if typ, ok := n.projection("session.sync_message"); ok || typ != "" {
		t.Errorf("Projection(session.sync_message) = %q, %v", typ, ok)
	}
	if len(imv2Entry().Projections) == 0 {
		t.Fatal("IM v2 projects nothing")
	}
}

func TestIMv2_P4_CatalogEntry(t *testing.T) {
	p := imv2Entry()
	if p.ID != ProfileIMv2 || !slices.Equal(p.TargetTypes, []string{TargetTypeIM}) || !p.ChannelScoped {
		t.Errorf("entry %+v", p)
	}
	want := map[string]Direction{
		TypeChatMessage:      dirBoth,
		TypeChatMessageDelta: ToConnector,
		TypeChatMessageAck:   dirBoth,
		TypeChatActivity:     ToConnector,
	}
	if len(p.Packets) != len(want) {
		t.Errorf("packets %v", p.Packets)
	}
	for typ, d := range want {
		if p.Packets[typ] != d {
			t.Errorf("%s: %b, want %b", typ, p.Packets[typ], d)
		}
	}
}

func TestIMv2_P7_FreshCopyCannotWidenCatalog(t *testing.T) {
	p := imv2Entry()
	p.Packets["session.sync_message"] = dirBoth
	p.Packets[TypeChatMessageDelta] = dirBoth
	p.Projections["history.snapshot"] = TypeChatMessage
	p.Projections["ui.projection"] = TypeChatMessage
	p.Projections[KindAssistantActivity] = TypeChatMessage
	p.TargetTypes[0] = "email"

	cat := DefaultCatalog()
	entry := cat[ProfileIMv2]
	entry.Packets["history.replay"] = dirBoth // mutate one catalog value …
	n := DefaultCatalog().Negotiate([]string{ProfileIMv2}, []string{ProfileIMv2})
	for _, typ := range []string{"session.sync_message", "history.replay"} {
		if n.Allows(typ, ToConnector) {
			t.Errorf("mutating a copy widened the catalog: %s allowed", typ)
		}
	}
	if n.Allows(TypeChatMessageDelta, ToXAgent) {
		t.Error("mutating a copy widened delta directions")
	}
	for _, k := range []string{"history.snapshot", "ui.projection"} {
		if n.MayProject(k) {
			t.Errorf("mutating a copy widened projections: %s", k)
		}
	}
	if typ, _ := n.projection(KindAssistantActivity); typ != TypeChatActivity || imv2Entry().TargetTypes[0] != TargetTypeIM {
		t.Error("a fresh imv2Entry() was changed by mutating an earlier one")
	}
	// … and a Negotiated made before a mutation does not see it either.
	before := cat.Negotiate([]string{ProfileIMv2}, []string{ProfileIMv2})
	entry.Packets["ui.projection"] = dirBoth
	if before.Allows("ui.projection", ToConnector) {
		t.Error("a Negotiated shares its map with the catalog entry")
	}
}

func TestDirection_P4_SetHas(t *testing.T) {
	if ToConnector.has(ToXAgent) || !dirBoth.has(ToXAgent) || dirBoth.has(0) || dirBoth.has(dirBoth) || dirBoth.String() != "both" {
		t.Error("Direction.has")
	}
	if ToConnector.reverse() != ToXAgent || ToXAgent.reverse() != ToConnector || Direction(0).String() != "invalid" {
		t.Error("Direction helpers")
	}
}

// TestNegotiate_P9_ExtensionKeepsBaseDirections: a catalog entry that
// lists the four base packets in other directions (an extension profile
// widening a delta or an activity to xAgent, or narrowing chat.message)
// changes no direction, alone or next to xagent.im.v2 (profile §4). Before,
// Negotiate took the union of every entry's directions.
func TestNegotiate_P9_ExtensionKeepsBaseDirections(t *testing.T) {
	const ext = "example.im-extras.v1"
	cat := DefaultCatalog()
	cat[ext] = Profile{
		ID:          ext,
		TargetTypes: []string{TargetTypeIM},
		Packets: map[string]Direction{
			TypeChatMessage:      ToXAgent,
			TypeChatMessageDelta: dirBoth,
			TypeChatMessageAck:   ToConnector,
			TypeChatActivity:     dirBoth,
			"chat.reaction":      dirBoth,
		},
		ChannelScoped: true,
	}
	want := map[string]Direction{
		TypeChatMessage:      dirBoth,
		TypeChatMessageDelta: ToConnector,
		TypeChatMessageAck:   dirBoth,
		TypeChatActivity:     ToConnector,
		"chat.reaction":      dirBoth, // the extension's own packet keeps its directions
	}
	for _, offered := range [][]string{{ProfileIMv2, ext}, {ext, ProfileIMv2}, {ext}} {
		n := cat.Negotiate(offered, offered)
		for typ, dirs := range want {
			for _, d := range []Direction{ToConnector, ToXAgent} {
				if got := n.Allows(typ, d); got != dirs.has(d) {
					t.Errorf("profiles %v: Allows(%s, %v) = %v, want %v", offered, typ, d, got, dirs.has(d))
				}
			}
		}
	}
}
