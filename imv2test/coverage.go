package imv2test

// Unobserved is a rule of RULES.md that no check can decide over the
// wire, and why.
type Unobserved struct {
	Rule string
	Why  string
}

// notObservable lists the rules of families P, I, E, M, D, A, C, S, X, W,
// H and T that no check exercises. Every other rule of those families is
// listed by at least one check (a test keeps the two lists complete and
// disjoint).
var notObservable = []Unobserved{
	{"P4", "the profile catalog is a data structure inside the implementation; only its effects reach the wire (K1.d, K10)"},
	{"P5", "querying one immutable negotiated object, and reloading it when a Descriptor's profiles change, is internal; a renegotiation would need a second profile to enable"},
	{"S7", "Common Protocol 3.0 has no packet that deletes a channel permanently"},
	{"S8", "needs a Connector restart, which the suite does not drive (restart a Connector with a durable store between two runs of K3 to see it)"},
	{"S9", "how pending and completed state are stored is internal; their behaviour on the wire is K3 and K11"},
	{"T4", "the size cap, timeout and base-URL resolution of xAgent's downloads happen inside xAgent; the XAgent interface has no download step"},
}

// NotObservable returns the rules no check can decide over the wire, with
// the reason for each.
func NotObservable() []Unobserved { return append([]Unobserved(nil), notObservable...) }
