package imv2

// Direction says which way a packet travels. In IM Profile v2 the author of a
// message is given by its direction, never by a payload field (I3):
// ToXAgent carries user input, ToConnector carries assistant output.
type Direction uint8

// The two directions are distinct bits, so the catalog can hold a set of
// them in one Direction (dirBoth).
const (
	// ToConnector is xAgent → Connector: finals, deltas, activity, acks of user messages.
	ToConnector Direction = 1
	// ToXAgent is Connector → xAgent: user messages and acks of finals.
	ToXAgent Direction = 2
)

// String returns "to_connector", "to_xagent", "both" (dirBoth) or "invalid".
func (d Direction) String() string {
	switch d {
	case ToConnector:
		return "to_connector"
	case ToXAgent:
		return "to_xagent"
	case dirBoth:
		return "both"
	}
	return "invalid"
}

// reverse returns the opposite direction: the way an ack travels.
func (d Direction) reverse() Direction {
	switch d {
	case ToConnector:
		return ToXAgent
	case ToXAgent:
		return ToConnector
	}
	return d
}
