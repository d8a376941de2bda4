package imv2_test

import (
	"slices"
	"testing"

	"github.com/xagentkit/imv2"
)

func TestNegotiate_P3_Intersection(t *testing.T) {
	cat := imv2.DefaultCatalog()
	cases := []struct {
		name                string
		supported, declared []string
		want                []string
	}{
		{"both offer im.v2", []string{"xagent.im.v1", imv2.ProfileIMv2}, []string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2}},
		{"hello lacks it", []string{"xagent.im.v1"}, []string{imv2.ProfileIMv2}, nil},
		{"card lacks it", []string{imv2.ProfileIMv2}, []string{"xagent.device.v1"}, nil},
		{"nil supported enables nothing", nil, []string{imv2.ProfileIMv2}, nil},
		{"empty supported enables nothing", []string{}, []string{imv2.ProfileIMv2}, nil},
		{"nil declared enables nothing", []string{imv2.ProfileIMv2}, nil, nil},
		{"a profile outside the catalog is never enabled", []string{"xagent.device.v1"}, []string{"xagent.device.v1"}, nil},
		{"duplicates collapse", []string{imv2.ProfileIMv2, imv2.ProfileIMv2}, []string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2}},
	}
	for _, c := range cases {
		n := cat.Negotiate(c.supported, c.declared)
		if got := n.Profiles(); !slices.Equal(got, c.want) {
			t.Errorf("%s: profiles %v, want %v", c.name, got, c.want)
		}
		if n.Has(imv2.ProfileIMv2) != (len(c.want) > 0) {
			t.Errorf("%s: Has(im.v2) = %v", c.name, n.Has(imv2.ProfileIMv2))
		}
		if len(c.want) == 0 && (n.Allows(imv2.TypeChatMessage, imv2.ToXAgent) || n.MayProject(imv2.KindAssistantMessageFinal)) {
			t.Errorf("%s: nothing negotiated, yet something is allowed", c.name)
		}
	}
}

func TestNegotiated_P5_Equal(t *testing.T) {
	cat := imv2.DefaultCatalog()
	a := cat.Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	b := cat.Negotiate([]string{"xagent.im.v1", imv2.ProfileIMv2}, []string{imv2.ProfileIMv2, "x"})
	none := cat.Negotiate(nil, []string{imv2.ProfileIMv2})
	if !a.Equal(b) || !b.Equal(a) {
		t.Error("same enabled profiles are not Equal")
	}
	if a.Equal(none) || none.Equal(a) {
		t.Error("different enabled profiles are Equal: a channel would not reload")
	}
	var nilN *imv2.Negotiated
	if !none.Equal(nilN) || nilN.Allows(imv2.TypeChatMessage, imv2.ToConnector) || nilN.MayProject(imv2.KindAssistantActivity) || nilN.Has(imv2.ProfileIMv2) {
		t.Error("a nil *Negotiated must allow nothing and equal the empty set")
	}
}

func TestNegotiated_P6_Allows(t *testing.T) {
	n := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	cases := []struct {
		typ  string
		dir  imv2.Direction
		want bool
	}{
		{imv2.TypeChatMessage, imv2.ToConnector, true},
		{imv2.TypeChatMessage, imv2.ToXAgent, true},
		{imv2.TypeChatMessageAck, imv2.ToConnector, true},
		{imv2.TypeChatMessageAck, imv2.ToXAgent, true},
		{imv2.TypeChatMessageDelta, imv2.ToConnector, true},
		{imv2.TypeChatMessageDelta, imv2.ToXAgent, false}, // D1: a Connector never sends deltas
		{imv2.TypeChatActivity, imv2.ToConnector, true},
		{imv2.TypeChatActivity, imv2.ToXAgent, false}, // C1
		{"message.push", imv2.ToXAgent, false},        // legacy im.v1, not negotiated
		{"session.sync_message", imv2.ToConnector, false},
		{imv2.TypeChatMessage, 0, false},
	}
	for _, c := range cases {
		if got := n.Allows(c.typ, c.dir); got != c.want {
			t.Errorf("Allows(%s, %s) = %v, want %v", c.typ, c.dir, got, c.want)
		}
	}
}

func TestNegotiated_P7_MayProject(t *testing.T) {
	n := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	for _, k := range []string{"session.sync_request", "session.sync_message", "session.sync_end", "history.snapshot",
		"history.replay", "ui.projection", "assistant.message.new_internal_kind", ""} {
		if n.MayProject(k) {
			t.Errorf("MayProject(%q) = true: internal signals must never reach the wire", k)
		}
	}
	for k, typ := range imv2.IMv2().Projections {
		if !n.MayProject(k) {
			t.Errorf("MayProject(%q) = false for a catalog kind", k)
		}
		if got, ok := n.Projection(k); !ok || got != typ || !n.Allows(got, imv2.ToConnector) {
			t.Errorf("Projection(%q) = %q, %v; want %q, a packet allowed toward the Connector", k, got, ok, typ)
		}
	}
	if typ, ok := n.Projection("session.sync_message"); ok || typ != "" {
		t.Errorf("Projection(session.sync_message) = %q, %v", typ, ok)
	}
	if len(imv2.IMv2().Projections) == 0 {
		t.Fatal("IM v2 projects nothing")
	}
}

func TestIMv2_P4_CatalogEntry(t *testing.T) {
	p := imv2.IMv2()
	if p.ID != imv2.ProfileIMv2 || !slices.Equal(p.TargetTypes, []string{imv2.TargetTypeIM}) || !p.ChannelScoped {
		t.Errorf("entry %+v", p)
	}
	want := map[string]imv2.Directions{
		imv2.TypeChatMessage:      imv2.DirBoth,
		imv2.TypeChatMessageDelta: imv2.DirToConnector,
		imv2.TypeChatMessageAck:   imv2.DirBoth,
		imv2.TypeChatActivity:     imv2.DirToConnector,
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
	p := imv2.IMv2()
	p.Packets["session.sync_message"] = imv2.DirBoth
	p.Packets[imv2.TypeChatMessageDelta] = imv2.DirBoth
	p.Projections["history.snapshot"] = imv2.TypeChatMessage
	p.Projections["ui.projection"] = imv2.TypeChatMessage
	p.Projections[imv2.KindAssistantActivity] = imv2.TypeChatMessage
	p.TargetTypes[0] = "email"

	cat := imv2.DefaultCatalog()
	entry := cat[imv2.ProfileIMv2]
	entry.Packets["history.replay"] = imv2.DirBoth // mutate one catalog value …
	n := imv2.DefaultCatalog().Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	for _, typ := range []string{"session.sync_message", "history.replay"} {
		if n.Allows(typ, imv2.ToConnector) {
			t.Errorf("mutating a copy widened the catalog: %s allowed", typ)
		}
	}
	if n.Allows(imv2.TypeChatMessageDelta, imv2.ToXAgent) {
		t.Error("mutating a copy widened delta directions")
	}
	for _, k := range []string{"history.snapshot", "ui.projection"} {
		if n.MayProject(k) {
			t.Errorf("mutating a copy widened projections: %s", k)
		}
	}
	if typ, _ := n.Projection(imv2.KindAssistantActivity); typ != imv2.TypeChatActivity || imv2.IMv2().TargetTypes[0] != imv2.TargetTypeIM {
		t.Error("a fresh IMv2() was changed by mutating an earlier one")
	}
	// … and a Negotiated made before a mutation does not see it either.
	before := cat.Negotiate([]string{imv2.ProfileIMv2}, []string{imv2.ProfileIMv2})
	entry.Packets["ui.projection"] = imv2.DirBoth
	if before.Allows("ui.projection", imv2.ToConnector) {
		t.Error("a Negotiated shares its map with the catalog entry")
	}
}

func TestDirections_P4_Has(t *testing.T) {
	if imv2.DirToConnector.Has(imv2.ToXAgent) || !imv2.DirBoth.Has(imv2.ToXAgent) || imv2.DirBoth.Has(0) {
		t.Error("Directions.Has")
	}
	if imv2.ToConnector.Reverse() != imv2.ToXAgent || imv2.ToXAgent.Reverse() != imv2.ToConnector || imv2.Direction(0).String() != "invalid" {
		t.Error("Direction helpers")
	}
}
