package imv2

// WireFields returns a copy of p with its wire members only: without the
// payload DecodePacket decoded with the envelope (decodedpayload.go), so
// tests can compare two decodes of a packet member by member.
func WireFields(p *Packet) Packet {
	q := *p
	q.decoded = nil
	return q
}
