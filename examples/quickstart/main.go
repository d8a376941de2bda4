// Command quickstart shows a Connector and an agent talking: it starts the
// console Connector and the xAgent simulator in one process, connected
// over a real loopback WebSocket, plays a short scripted conversation and
// exits.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/examples/console/consolebridge"
	"github.com/xagentkit/imv2/sim"
)

func main() {
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), "usage: quickstart\n\n"+
			"Plays a scripted conversation between the console Connector and the\n"+
			"xAgent simulator over loopback, and exits. It takes no flags.\n")
	}
	flag.Parse() // -h prints the usage and exits 0; any other flag exits 2
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// syncWriter lets the Connector and the simulator print without tearing lines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func run(ctx context.Context, stdout io.Writer) error {
	out := &syncWriter{w: stdout}
	say := func(format string, args ...any) { fmt.Fprintf(out, "\n── "+format+"\n", args...) }

	// The Connector: the console bridge, its platform is this terminal.
	bridge, err := consolebridge.New(consolebridge.Config{Addr: "127.0.0.1:0", Out: out, Options: connector.Options{Mode: connector.ModeStream}})
	if err != nil {
		return err
	}
	defer bridge.Close()
	url, err := bridge.Start()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Connector %s listening on %s\n", consolebridge.CardID, url)

	// xAgent: the simulator dials /ws, says hello and opens a channel.
	// Each final the Connector acknowledges is reported here, so the script
	// waits for acks instead of polling.
	acked := make(chan string, 8)
	agent, err := sim.Start(ctx, sim.Config{Connector: url, Rate: 40, Options: &imv2.Options{
		OnDelivered: func(_ string, m imv2.ChatMessage, _ imv2.AckStatus) { acked <- m.MessageID },
	}})
	if err != nil {
		return err
	}
	defer agent.Close()
	ch := agent.ChannelID()
	fmt.Fprintf(out, "xagent › hello done, channel %s open\n", ch)

	say("1. a user message, answered with activity and a streamed reply")
	if _, err := bridge.Say(ctx, "What is the weather in Paris?"); err != nil {
		return err
	}
	if err := waitAck(ctx, acked); err != nil {
		return err
	}

	say("2. a reply with a file, uploaded to the Connector first (M7)")
	file := filepath.Join(os.TempDir(), "imv2-quickstart-forecast.txt")
	if err := os.WriteFile(file, []byte("Paris: 12°C, light rain\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(file)
	if err := agent.ReplyWith(ctx, ch, "Here is the forecast as a file.", file); err != nil {
		return err
	}
	if err := waitAck(ctx, acked); err != nil {
		return err
	}

	say("3. xAgent lost an ack and resends a final: the Connector answers duplicate and posts nothing (A6)")
	finals := agent.Finals()
	last := finals[len(finals)-1]
	ack, err := agent.Resend(ctx, ch, last)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "xagent › resent final %s → ack %s\n", last.MessageID, ack.Status)
	if ack.Status != imv2.AckDuplicate {
		return fmt.Errorf("resent final answered %s, want duplicate", ack.Status)
	}
	say("done")
	return nil
}

// waitAck waits for the Connector's ack of the simulator's next final.
func waitAck(ctx context.Context, acked <-chan string) error {
	select {
	case <-acked:
		return nil
	case <-ctx.Done():
		return errors.New("the conversation did not finish in time")
	}
}
