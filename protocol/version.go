package protocol

import (
	"cmp"
	"fmt"
	"github.com/xagentkit/imv2"
	"strconv"
	"strings"
)

// Version is a Common Protocol version, major.minor (a patch level a peer
// announces is read and dropped by ParseVersion)
// (Common Protocol §8.1 and §12). The hello carries xAgent's own current version and the ack the
// Connector's own; neither is a list, and each side admits the other when
// its version lies in the range it is compatible with (W4).
type Version struct {
	Major, Minor int
}

// Version30 is the Common Protocol version this SDK speaks and writes:
// ProtocolVersion, parsed.
var Version30 = Version{Major: 3, Minor: 0}

// ParseVersion parses "major.minor" or "major.minor.patch": runs of at
// most nine decimal digits around dots, nothing else. A patch level is
// admitted and dropped: Common Protocol §8.1 and §12 compare versions by
// what changes compatibility, so "4.4.0" is 4.4 and "3.0.1" is 3.0.
// "3.0", "4.3", "10.12" and "3.0.1" parse; "", "x", "3", "3.0.1.2",
// "3.0.", "v3.0" and "-1.0" do not.
func ParseVersion(s string) (Version, error) {
	major, rest, ok := strings.Cut(s, ".")
	minor, patch, hasPatch := strings.Cut(rest, ".")
	ma, okMa := versionPart(major)
	mi, okMi := versionPart(minor)
	_, okPa := versionPart(patch)
	if !ok || !okMa || !okMi || hasPatch && !okPa {
		return Version{}, imv2.Errorf(imv2.CodeInvalidPacket, "protocol_version %q is not major.minor or major.minor.patch", shortText(s))
	}
	return Version{Major: ma, Minor: mi}, nil
}

func versionPart(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// String returns "major.minor".
func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Compare returns -1, 0 or +1 as v is older than, equal to or newer than w.
func (v Version) Compare(w Version) int {
	if c := cmp.Compare(v.Major, w.Major); c != 0 {
		return c
	}
	return cmp.Compare(v.Minor, w.Minor)
}

// shortText cuts s for an error message: a peer's value is echoed, never
// a long one.
func shortText(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
