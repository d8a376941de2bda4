package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestQuickstart runs the scripted conversation and checks what a reader
// must see: the streamed reply, the file, and the duplicate answer.
func TestQuickstart(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"you   ✓ What is the weather in Paris?",
		"agent › You said: What is the weather in Paris?",
		"📎 imv2-quickstart-forecast.txt",
		"→ ack duplicate",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("transcript lacks %q:\n%s", want, out.String())
		}
	}
}
