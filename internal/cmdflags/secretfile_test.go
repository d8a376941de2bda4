package cmdflags

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadSecretFile_OneBoundedLine: a one-line file is read with its
// line end trimmed; /dev/zero, an oversized, empty or two-line file is
// refused without reading more than the bound; a 0644 file warns.
func TestReadSecretFile_OneBoundedLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	s, warn, err := ReadSecretFile(write("ok", "s3cret-pass\n", 0o600))
	require.NoError(t, err)
	require.Equal(t, "s3cret-pass", s)
	require.Empty(t, warn)

	_, warn, err = ReadSecretFile(write("open", "s3cret-pass", 0o644))
	require.NoError(t, err)
	require.Contains(t, warn, "chmod 600")

	for name, content := range map[string]string{"empty": "\n", "two lines": "a\nb\n", "big": string(make([]byte, MaxSecretFileBytes+1))} {
		_, _, err := ReadSecretFile(write(name, content, 0o600))
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "a\nb", "the content is never in the error")
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		_, _, err := ReadSecretFile("/dev/zero")
		require.ErrorContains(t, err, "no regular file")
	}
}
