package imv2

import "slices"

// Profile is one catalog entry (P4): which target types may declare the
// profile, which packet types travel which way, and which internal xAgent
// payload kinds may be projected outbound. It is data: channel code asks a
// Negotiated set built from entries, never a hard-coded list (P5).
type Profile struct {
	ID string
	// TargetTypes may declare the profile in a Card or Descriptor (P1).
	TargetTypes []string
	// Packets maps each packet type to the directions it may travel:
	// ToConnector, ToXAgent or dirBoth.
	Packets map[string]Direction
	// ChannelScoped says every packet needs connector_channel_id (I1).
	ChannelScoped bool
	// Projections maps each internal xAgent payload kind that may be
	// projected to the wire under this profile to the packet type it becomes
	// (P7). Any kind not listed stays home.
	Projections map[string]string
}

// dirBoth is the catalog's value for a packet type that travels both ways.
// A Direction in the catalog is a set: ToConnector and ToXAgent are bits.
const dirBoth = ToConnector | ToXAgent

// has reports whether the set s holds the single direction d.
func (s Direction) has(d Direction) bool { return (d == ToConnector || d == ToXAgent) && s&d != 0 }

// Internal xAgent payload kinds that IM v2 may project outbound (P7).
const (
	KindAssistantMessageFinal = "assistant.message.final"
	KindAssistantMessageDelta = "assistant.message.delta"
	KindAssistantActivity     = "assistant.activity"
)

// IMv2 returns the catalog entry of xagent.im.v2 (P4): chat.message and
// chat.message.ack both ways, chat.message.delta and chat.activity
// xAgent → Connector only, all channel-scoped, for target type im only.
// It returns a fresh value each call, so no caller can widen another's view.
func imv2Entry() Profile {
	return Profile{
		ID:          ProfileIMv2,
		TargetTypes: []string{TargetTypeIM},
		Packets: map[string]Direction{
			TypeChatMessage:      dirBoth,
			TypeChatMessageDelta: ToConnector,
			TypeChatMessageAck:   dirBoth,
			TypeChatActivity:     ToConnector,
		},
		ChannelScoped: true,
		Projections: map[string]string{
			KindAssistantMessageFinal: TypeChatMessage,
			KindAssistantMessageDelta: TypeChatMessageDelta,
			KindAssistantActivity:     TypeChatActivity,
		},
	}
}

// basePacketDirections returns the directions profile §4 fixes for the
// four base packets, which an extension profile may not change: a catalog
// entry that lists one of them gets these directions, whatever it says.
func basePacketDirections(typ string) (Direction, bool) {
	switch typ {
	case TypeChatMessage, TypeChatMessageAck:
		return dirBoth, true
	case TypeChatMessageDelta, TypeChatActivity:
		return ToConnector, true
	}
	return 0, false
}

// Catalog is a set of profile entries keyed by ID.
type Catalog map[string]Profile

// DefaultCatalog returns a catalog holding the profiles this SDK implements:
// xagent.im.v2.
func DefaultCatalog() Catalog {
	p := imv2Entry()
	return Catalog{p.ID: p}
}

// Negotiated is the immutable result of negotiation for one channel (P5): the
// profiles both sides enabled, and the only thing channel code asks "may
// this packet travel this way?" and "may this internal kind go out?".
// The zero value allows nothing.
type Negotiated struct {
	profiles []string
	packets  map[string]Direction
	kinds    map[string]string
}

// Negotiate intersects what xAgent offered in its hello (supported) with
// what the Card declares (declared) and loads the catalog entries of the
// result (P3). Profiles missing from the catalog are dropped: a profile the
// SDK does not implement is never enabled. A nil supported list enables
// nothing (P3: never implicitly). An entry may list the four base packets
// (P9) but never widens or narrows their directions (profile §4).
func (c Catalog) Negotiate(supported, declared []string) *Negotiated {
	n := &Negotiated{packets: map[string]Direction{}, kinds: map[string]string{}}
	for _, id := range supported {
		if !slices.Contains(declared, id) || slices.Contains(n.profiles, id) {
			continue
		}
		entry, ok := c[id]
		if !ok {
			continue
		}
		n.profiles = append(n.profiles, id)
		for typ, dirs := range entry.Packets {
			if base, ok := basePacketDirections(typ); ok {
				dirs = base // profile §4: no profile changes the four packets' directions
			}
			n.packets[typ] |= dirs
		}
		for kind, typ := range entry.Projections {
			n.kinds[kind] = typ
		}
	}
	return n
}

// Profiles returns the enabled profile IDs, in the hello's order. It is the
// Descriptor's connection.profiles (P2).
func (n *Negotiated) Profiles() []string {
	if n == nil {
		return nil
	}
	return slices.Clone(n.profiles)
}

// Has reports whether profile id is enabled.
func (n *Negotiated) has(id string) bool {
	return n != nil && slices.Contains(n.profiles, id)
}

// Allows reports whether a packet of type typ may travel in dir on this
// channel (P5, P6). A false answer means: drop silently, no error, no ack.
func (n *Negotiated) Allows(typ string, dir Direction) bool {
	if n == nil {
		return false
	}
	return n.packets[typ].has(dir)
}

// MayProject reports whether an internal xAgent payload kind may be
// projected outbound (P7). Default deny: session sync, history snapshots,
// replays, UI projections and every kind no catalog entry lists stay home.
func (n *Negotiated) MayProject(kind string) bool {
	_, ok := n.projection(kind)
	return ok
}

// Projection returns the packet type an internal payload kind becomes on
// the wire, and false when the kind may not be projected (P7).
func (n *Negotiated) projection(kind string) (packetType string, ok bool) {
	if n == nil {
		return "", false
	}
	packetType, ok = n.kinds[kind]
	return packetType, ok
}

// Equal reports whether two negotiated sets enable the same profiles, so a
// Descriptor change can tell whether a channel must reload (P5).
func (n *Negotiated) Equal(o *Negotiated) bool {
	return slices.Equal(n.Profiles(), o.Profiles())
}
