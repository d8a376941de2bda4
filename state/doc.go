// Package state holds the interfaces every store of the SDK implements
// beyond the profile's own (imv2.PendingStore, imv2.CompletedStore,
// imv2.ClaimStore), with their in-memory implementations: the channel
// and connector registries of the data plane's Server, the channel store
// of its Client, the kit's conversation bindings, and the kit's Store
// that gathers them. It sits below the kit (connector) and the data plane
// (dataplane), so that a store such as boltstore or pgstore imports it
// and the root package without either of them, or their dependencies.
//
//	interface          implemented in memory by           default cap
//	ChannelRegistry    MemoryRegistry                     DefaultRegistryCap (100,000 IDs)
//	ConnectorRegistry  (none: only shared stores need it)
//	ChannelStore       MemoryChannelStore                 DefaultChannelStoreCap (1,000 IDs)
//	BindingStore       MemoryBindingStore                 DefaultMaxBindings (100,000)
//	BindingUpdater     MemoryBindingStore
//	ResultStore        the root's imv2.NewMemoryCompletedStore   its records' cap (MaxResultBytes each)
//	Store              the kit's default: the memory ones above and the
//	                   root's (imv2.DefaultPendingCap, imv2.DefaultCompletedCap)
//
// The memory implementations keep what they hold for the life of the
// process. None has a TTL: every channel ID they keep is of a channel
// the data plane issued (Server) or opened (Client), never one a peer
// merely named, and goes when its channel does (the Server's Forget, the
// kit's Unbind, the Client's CloseChannel). Beyond its cap a write of a
// new entry fails with code connector_channel_unavailable.
//
// OpenChannels is the data plane Server's view of its open channels that a
// relay between replicas needs (pgstore.Relay).
//
// storetest has the contract tests of the pending, completed, claim,
// result, binding and channel stores. The durable ChannelStores are
// boltstore's and pgstore's Store, each also the pending and completed
// store that make the Client's finals outlive a restart.
package state
