package cmdflags

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxSecretFileBytes bounds a secret file's read: a secret is one line,
// and a path to /dev/zero or a log file must not fill the memory.
const MaxSecretFileBytes = 4 << 10

// ReadSecretFile reads a secret (a password, an API key) from a file, as
// container secrets are mounted: one line of at most MaxSecretFileBytes,
// its line end trimmed. A longer, empty or multi-line file, or one that
// is no regular file, is an error naming the file (never its content).
// warning is set when the file is readable by its group or others.
func ReadSecretFile(path string) (secret, warning string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", "", err
	}
	if !st.Mode().IsRegular() {
		return "", "", fmt.Errorf("%s is no regular file (%s)", path, st.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretFileBytes+1))
	if err != nil {
		return "", "", err
	}
	if len(b) > MaxSecretFileBytes {
		return "", "", fmt.Errorf("%s is longer than %d bytes: a secret file holds one line", path, MaxSecretFileBytes)
	}
	s := strings.TrimRight(string(b), "\r\n")
	switch {
	case strings.TrimSpace(s) == "":
		return "", "", fmt.Errorf("%s is empty", path)
	case strings.ContainsAny(s, "\r\n"):
		return "", "", fmt.Errorf("%s holds %d lines: a secret file holds one line", path, len(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })))
	}
	if st.Mode().Perm()&0o077 != 0 {
		warning = fmt.Sprintf("%s is readable by its group or others (mode %#o); chmod 600 it", path, st.Mode().Perm())
	}
	return s, warning, nil
}
