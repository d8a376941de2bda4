package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/xagentkit/imv2/internal/cmdflags"
)

// maxKeyFile bounds the read of -api-key-file: a key is one short line.
const maxKeyFile = 4 << 10

// keyFlags is the API key's flags: -api-key (visible in ps), -api-key-file
// and, without either, $XAGENT_API_KEY, as the Connector commands take it.
type keyFlags struct{ flag, file *string }

func defineKeyFlags(fs *flag.FlagSet, what string) keyFlags {
	return keyFlags{
		flag: fs.String("api-key", "", what+" (visible in ps: prefer $"+cmdflags.KeyEnv+" or -api-key-file)"),
		file: fs.String("api-key-file", "", "read the API key from FILE; without it or -api-key, $"+cmdflags.KeyEnv),
	}
}

// read returns the key: -api-key-file or -api-key (not both), else the
// environment's; "" when none is given.
func (k keyFlags) read() (string, error) {
	switch {
	case *k.file != "" && *k.flag != "":
		return "", errors.New("-api-key and -api-key-file: give one")
	case *k.flag != "":
		return *k.flag, nil
	case *k.file == "":
		return os.Getenv(cmdflags.KeyEnv), nil
	}
	f, err := os.Open(*k.file)
	if err != nil {
		return "", fmt.Errorf("-api-key-file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("-api-key-file: %w", err)
	case len(b) > maxKeyFile:
		return "", fmt.Errorf("-api-key-file %s: over %d bytes; a key is one line", *k.file, maxKeyFile)
	}
	key := strings.TrimSpace(string(b))
	if key == "" || strings.ContainsAny(key, "\r\n") {
		return "", fmt.Errorf("-api-key-file %s: want one non-empty line", *k.file)
	}
	return key, nil
}
