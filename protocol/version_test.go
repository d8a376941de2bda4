package protocol_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/protocol"
)

func TestParseVersion_W4(t *testing.T) {
	for in, want := range map[string]protocol.Version{"3.0": protocol.Version30, "4.3": {Major: 4, Minor: 3}, "3.10": {Major: 3, Minor: 10}, "10.0": {Major: 10}} {
		got, err := protocol.ParseVersion(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
		require.Equal(t, in, got.String())
	}
	// A patch level is read and dropped: versions compare by major and
	// minor (Common Protocol §8.1, §12).
	for in, want := range map[string]protocol.Version{"4.4.0": {Major: 4, Minor: 4}, "3.0.1": protocol.Version30, "3.0.0": protocol.Version30, "2.9.99": {Major: 2, Minor: 9}} {
		got, err := protocol.ParseVersion(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "x", "3", "3.", ".0", "3.0.", "3.0.1.2", "3.0.x", "3..1", "v3.0", "-1.0", "+3.0", "3.0 ", "3,0", "1234567890.0"} {
		_, err := protocol.ParseVersion(in)
		require.ErrorIs(t, err, &imv2.Error{Code: imv2.CodeInvalidPacket}, "%q", in)
	}
	require.Equal(t, -1, protocol.Version{Major: 2, Minor: 9}.Compare(protocol.Version30))
	require.Equal(t, 1, protocol.Version{Major: 3, Minor: 1}.Compare(protocol.Version30))
	require.Equal(t, 1, protocol.Version{Major: 4}.Compare(protocol.Version{Major: 3, Minor: 9}))
	require.Equal(t, 0, protocol.Version30.Compare(protocol.Version{Major: 3}))
}
