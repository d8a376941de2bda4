package main

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2/examples/xmpp/xmppbridge"
	"github.com/xagentkit/imv2/internal/cmdtest"
)

func TestHelp_PrintsUsageAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "xmpp-connector", main, "-h")
	cmdtest.CheckHelp(t, cmd, "Usage of xmpp-connector", "-listen", "-state", "-jid", "-to", "-server", "-ca",
		"-api-key-file", "XAGENT_API_KEY", "-password-file", "XMPP_PASSWORD_FILE", "-allow-weak-key", "-log-level", "-log-format", "-version",
		"-metrics-addr", "-metrics-token-file", "XAGENT_METRICS_TOKEN", "never /metrics", "-file-host", "-private-file-hosts")
}

// -version prints the bridge's and the module's version and exits 0,
// without XAGENT_API_KEY.
func TestVersion_PrintsVersionAndExitsZero(t *testing.T) {
	cmd := cmdtest.Main(t, "xmpp-connector", main, "-version")
	cmd.Env = append(cmd.Env, "XAGENT_API_KEY=")
	cmdtest.CheckHelp(t, cmd, "xmpp "+xmppbridge.Version, "module ")
}

// -file-host takes host[:port]s, repeated or as a comma list, in order;
// a URL, a path, a user or an empty item is refused.
func TestFileHost_RepeatedOrCommaList(t *testing.T) {
	parse := func(args ...string) (hostList, error) {
		var h hostList
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.Var(&h, "file-host", "")
		return h, fs.Parse(args)
	}
	h, err := parse("-file-host", "127.0.0.1:5280, upload.example.org", "-file-host", "[::1]:5281")
	require.NoError(t, err)
	require.Equal(t, hostList{"127.0.0.1:5280", "upload.example.org", "[::1]:5281"}, h)
	for _, bad := range []string{"http://upload.example.org", "upload.example.org/files", "u@upload.example.org", "a,,b", ""} {
		_, err := parse("-file-host", bad)
		require.Error(t, err, bad)
	}
}
