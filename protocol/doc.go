// Package protocol is the Common Protocol 3.0 control plane of the xAgent
// Connector: the Connector Card and Connection Descriptor with their
// validation, the hello, channel, Descriptor, auth and tool payloads, the
// tool input schema helpers, the control-plane packet types and error
// codes, and the Common Protocol version type.
//
// The IM Profile v2 itself (the envelope, the four IM payloads, the
// profile catalog and the Channel) is the root package imv2, which does
// not import this one.
package protocol
