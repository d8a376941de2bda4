//go:build unix

package cmdflags

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/xagentkit/imv2/internal/apikey"
)

// keyFlags parses args into a Key logging to buf.
func keyFlags(t *testing.T, buf *bytes.Buffer, args ...string) *Key {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	k := KeyFlags(fs, "the key")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	k.Log = slog.New(slog.NewTextHandler(buf, nil))
	return k
}

func writeKeyFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return file
}

const strongKey = "Zq8vN2xR7kLpW4tY9mHc3Jb6"

// TestKeyFile_ReadAsASecret (issue 37): -api-key-file is read as a
// secret. /dev/zero is refused as no regular file and a regular file over
// MaxSecretFileBytes after that many bytes (before, /dev/zero was read
// whole: 0.9–2 GB in 3 s);
// a file of two lines is refused (before: accepted, an unusable key); a
// file its group or others can read is used with a warning (before:
// silently); a space inside the key is refused.
func TestKeyFile_ReadAsASecret(t *testing.T) {
	var buf bytes.Buffer
	_, err := keyFlags(t, &buf, "-api-key-file", "/dev/zero").Read()
	if err == nil || !strings.Contains(err.Error(), "no regular file") {
		t.Errorf("/dev/zero: %v, want refused as no regular file", err)
	}
	for content, want := range map[string]string{
		strings.Repeat("k", MaxSecretFileBytes+1):       "longer than 4096 bytes",
		strongKey + "\nsecond-line-" + strongKey + "\n": "holds 2 lines",
		strongKey + "\r\n" + strongKey:                  "holds 2 lines",
		"Zq8vN2xR7 kLpW4tY9mHc3Jb6\n":                   "a space or a control character",
		"Zq8vN2xR7\x00kLpW4tY9mHc3Jb6":                  "a space or a control character",
		"\n\n":                                          "is empty",
	} {
		_, err := keyFlags(t, &buf, "-api-key-file", writeKeyFile(t, content, 0o600)).Read()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", content, err, want)
		}
	}
	if buf.Len() != 0 {
		t.Errorf("a 0600 file logged %q", buf.String())
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604} {
		buf.Reset()
		key, err := keyFlags(t, &buf, "-api-key-file", writeKeyFile(t, " "+strongKey+"\n", mode)).Read()
		if err != nil || key != strongKey {
			t.Errorf("mode %04o: %q, %v", mode, key, err)
		}
		if !strings.Contains(buf.String(), "readable by its group or others") || !strings.Contains(buf.String(), fmt.Sprintf("mode=%04o", mode)) {
			t.Errorf("mode %04o: no warning logged: %q", mode, buf.String())
		}
	}
}

// TestKeyStrength_LowEntropyRefusedHoweverLong (issue 37): a key of one
// repeated character, a run, common words or a repeated chunk is refused
// however long (before, length was the only test: 22 × "a" passed), and
// -allow-weak-key still takes it for a test; 10,000 keys of 16 random
// bytes (base64 and hex, a fixed seed) all pass.
func TestKeyStrength_LowEntropyRefusedHoweverLong(t *testing.T) {
	t.Setenv(KeyEnv, "")
	for _, key := range []string{
		strings.Repeat("a", 22), strings.Repeat("a", 200), strings.Repeat("Ab1!", 16),
		"passwordpasswordpassword", "correcthorsebatterystaple", "CorrectHorseBatteryStaple2024!",
		"P4ssw0rd!P4ssw0rd!P4ssw0rd!", "abcdefghijklmnopqrstuvwxyz0123456789", "quickbrownfoxjumpsoverthelazydog",
		"qwertyuiopasdfghjklzxcvbnm1234567890",
	} {
		var buf bytes.Buffer
		if _, err := keyFlags(t, &buf, "-api-key", key).Read(); err == nil || !strings.Contains(err.Error(), "guessable") {
			t.Errorf("%q (%.0f bits): %v, want refused as guessable", key, apikey.Bits(key), err)
		}
		if got, err := keyFlags(t, &buf, "-api-key", key, "-allow-weak-key").Read(); err != nil || got != key {
			t.Errorf("%q with -allow-weak-key: %q, %v", key, got, err)
		}
	}
	r := rand.New(rand.NewPCG(37, 37))
	b := make([]byte, 16)
	for i := range 10_000 {
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		for _, key := range []string{base64.RawURLEncoding.EncodeToString(b), base64.StdEncoding.EncodeToString(b), hex.EncodeToString(b)} {
			if err := apikey.CheckStrength(key); err != nil {
				t.Fatalf("random key %d %q refused: %v", i, key, err)
			}
		}
	}
}

// TestKeyFile_SIGHUPReloads (issue 37): after the key file is rewritten,
// a SIGHUP hands the new key to set; a file that fails the checks (two
// lines, a guessable key) is logged and set is not called. Before, the
// file was read once at start.
func TestKeyFile_SIGHUPReloads(t *testing.T) {
	// Watch's goroutine ends with its context (os/signal's own loop stays).
	defer goleak.VerifyNone(t, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreCurrent())
	file := writeKeyFile(t, strongKey+"\n", 0o600)
	var buf syncBuf
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	k := KeyFlags(fs, "the key")
	if err := fs.Parse([]string{"-api-key-file", file}); err != nil {
		t.Fatal(err)
	}
	k.Log = slog.New(slog.NewTextHandler(&buf, nil))
	got := make(chan string, 4)
	ctx, cancel := context.WithCancel(context.Background())
	k.Watch(ctx, func(key string) error { got <- key; return nil })
	defer cancel()

	hup := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	// Watch has subscribed once a first SIGHUP is delivered to it; until
	// then the default action would end the process, so wait for it.
	waitLog := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(buf.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no log line %q: %q", what, buf.String())
			}
			time.Sleep(time.Millisecond)
		}
	}
	const next = "Hw5tK9pQ2vZ7xM3nB8cL4rY6"
	hup(next + "\n") // Watch subscribed before it returned: the signal is its
	select {
	case key := <-got:
		if key != next {
			t.Fatalf("reloaded %q, want %q", key, next)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no reload: %q", buf.String())
	}
	waitLog("was reloaded")
	hup(strings.Repeat("a", 30) + "\n")
	waitLog("not reloaded")
	hup(next + "\n" + next + "\n")
	waitLog("holds 2 lines")
	for len(got) > 0 { // only the good file may have been handed over
		if key := <-got; key != next {
			t.Fatalf("a bad file was handed over: %q", key)
		}
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
