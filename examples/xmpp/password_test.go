package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadPassword_FileOrEnv: -password-file wins over
// $XMPP_PASSWORD_FILE, which wins over $XMPP_PASSWORD; /dev/zero and a
// two-line file are refused (bounded read).
func TestReadPassword_FileOrEnv(t *testing.T) {
	dir := t.TempDir()
	flagFile, envFile := filepath.Join(dir, "flag"), filepath.Join(dir, "env")
	require.NoError(t, os.WriteFile(flagFile, []byte("from-flag\n"), 0o600))
	require.NoError(t, os.WriteFile(envFile, []byte("from-env-file\n"), 0o600))
	log := slog.New(slog.DiscardHandler)
	t.Setenv("XMPP_PASSWORD", "from-env")
	pw, err := readPassword("", log)
	require.NoError(t, err)
	require.Equal(t, "from-env", pw)
	t.Setenv("XMPP_PASSWORD_FILE", envFile)
	pw, err = readPassword("", log)
	require.NoError(t, err)
	require.Equal(t, "from-env-file", pw)
	pw, err = readPassword(flagFile, log)
	require.NoError(t, err)
	require.Equal(t, "from-flag", pw)

	_, err = readPassword("/dev/zero", log)
	require.ErrorContains(t, err, "no regular file")
	two := filepath.Join(dir, "two")
	require.NoError(t, os.WriteFile(two, []byte("a\nb\n"), 0o600))
	_, err = readPassword(two, log)
	require.ErrorContains(t, err, "holds 2 lines")
}
