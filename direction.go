package imv2

// Direction says which way a packet travels. In IM Profile v2 the author of a
// message is given by its direction, never by a payload field (I3):
// ToXAgent carries user input, ToConnector carries assistant output.
type Direction uint8

const (
	// ToConnector is xAgent → Connector: finals, deltas, activity, acks of user messages.
	ToConnector Direction = iota + 1
	// ToXAgent is Connector → xAgent: user messages and acks of finals.
	ToXAgent
)

// String returns "to_connector", "to_xagent" or "invalid".
func (d Direction) String() string {
	switch d {
	case ToConnector:
		return "to_connector"
	case ToXAgent:
		return "to_xagent"
	}
	return "invalid"
}

// Reverse returns the opposite direction: the way an ack travels.
func (d Direction) Reverse() Direction {
	switch d {
	case ToConnector:
		return ToXAgent
	case ToXAgent:
		return ToConnector
	}
	return d
}
