package state

import "github.com/xagentkit/imv2"

// Store is everything a kit Connector keeps (connector.Options.Store):
// the sender's pending user messages, the receiver's completed finals
// (with claims when it is an imv2.ClaimStore), the channel IDs it issued
// and the bindings. It is four small interfaces, each of which can be
// written alone and joined with the memory versions of the others (see
// the example); storetest has contract tests for the pending, completed,
// claim and binding stores:
//
//	imv2.PendingStore    3 methods  Add, Remove, List
//	imv2.CompletedStore  4 methods  Lookup, Record, DropChannel, Handover
//	ChannelRegistry      3 methods  Known, Register, Forget
//	BindingStore         4 methods  Bind, Binding, Unbind, Channels
//
// boltstore.Store is one, durable in one file; pgstore.Store is one
// shared by replicas.
type Store interface {
	imv2.PendingStore
	imv2.CompletedStore
	ChannelRegistry
	BindingStore
}

// OpenChannels is what a relay between Connector replicas needs of the
// data plane's Server (dataplane.Server implements it): the channels open
// on this replica. The kit hands its Server to an Options.Relay that has
// Serve(OpenChannels), as pgstore.Relay does.
type OpenChannels interface {
	// IsOpen reports whether the channel is open here on a live
	// connection.
	IsOpen(channelID string) bool
	// Channel returns the channel's Channel, open or not, or nil when it
	// is not held here.
	Channel(channelID string) *imv2.Channel
	// ChannelIDs returns the IDs of every channel held here, sorted.
	ChannelIDs() []string
}
