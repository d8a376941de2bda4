//go:build unix

// Command bench runs the Telegram Connector and a Chat SDK bot on the same
// work, one after the other, each against its own fresh telegram-test-api
// 4.2.1 behind the same proxy (internal/botapitest, sendChatAction
// answered true as by Telegram), and prints a side-by-side table
// (BENCHMARKS.md, "Telegram: beside the Chat SDK").
//
// The work: -chats private chats; the user of each sends -each messages at
// once; every message is answered by the reply "answer to TEXT lorem …"
// streamed in -chunks pieces -gap apart, then its final. The Connector's
// xAgent is this process (agent.go); the Chat SDK bot is bench/bot.mjs,
// whose handler streams the same pieces at the same gap.
//
// Figures, each of the bridge process alone (the Connector's or node's;
// not the emulator's, not the agent's):
//
//   - CPU per answered message: utime+stime (/proc/PID/stat) from just
//     before the first user message to the last reply shown, divided by
//     the replies shown;
//   - memory per chat: VmHWM and VmRSS (/proc/PID/status) at the end less
//     VmRSS idle before the first chat (the Connector's pairing counts, as
//     a chat costs it a channel), divided by the chats;
//   - what each chat shows at the end (the emulator's record): replies
//     shown once and in order, twice, out of order, missing, and other
//     messages left (a placeholder or a partial text);
//   - calls counted at the proxy: sends and edits per reply, the most to
//     one chat and to the bot in any one second, calls refused.
//
// Run from examples/telegram after npm ci (scripts/bench-telegram.sh does):
//
//	go run ./bench [-chats 100 -each 3 -chunks 10 -gap 200ms]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xagentkit/imv2/examples/telegram/internal/botapitest"
)

// perChat is the pace both sides are held to: one send or edit a second
// to a chat (the Connector's tgbridge.PerChat, which it ships with; the
// Chat SDK's streamingEditIntervalMs, set to it).
const perChat = time.Second

type config struct {
	chats, each, chunks int
	gap                 time.Duration
	wait                time.Duration
	sides               string
	peerConcurrency     string
	peerPlaceholder     bool
	peerProfile         string
}

func main() {
	var c config
	flag.IntVar(&c.chats, "chats", 100, "private chats")
	flag.IntVar(&c.each, "each", 3, "user messages per chat, sent at once")
	flag.IntVar(&c.chunks, "chunks", 10, "pieces a reply is streamed in")
	flag.DurationVar(&c.gap, "gap", 200*time.Millisecond, "time between a reply's pieces")
	flag.DurationVar(&c.wait, "wait", 5*time.Minute, "longest wait for a side's replies")
	flag.StringVar(&c.sides, "sides", "connector,chatsdk", "the sides to run, in order")
	flag.StringVar(&c.peerConcurrency, "chatsdk-concurrency", "serial",
		`the Chat SDK's concurrency: "serial" (strategy concurrent, maxConcurrent 1: every message, one at a time a chat), or a strategy: drop (its default), queue, burst, debounce, concurrent`)
	flag.BoolVar(&c.peerPlaceholder, "chatsdk-placeholder", false, `the Chat SDK streams after its default "..." placeholder (default: none, as the Connector)`)
	flag.StringVar(&c.peerProfile, "chatsdk-cpuprofile", "", "write the bot's V8 CPU profile (node --cpu-prof) into this directory")
	flag.Parse()
	if c.chats < 1 || c.each < 1 || c.chunks < 1 || c.gap < 0 {
		fmt.Fprintln(os.Stderr, "bench: -chats, -each and -chunks must be at least 1, -gap not negative")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var res []result
	for _, side := range strings.Split(c.sides, ",") {
		fmt.Fprintf(os.Stderr, "bench: %s: %d chats × %d messages, %d chunks %v apart\n", side, c.chats, c.each, c.chunks, c.gap)
		r, err := run(ctx, c, side)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", side, err)
			os.Exit(1)
		}
		res = append(res, r)
	}
	printTable(os.Stdout, c, res)
}

// bridge is a side's process under measure.
type bridge struct {
	name string
	cmd  *exec.Cmd
	// pair binds the chats before the measure (the Connector's pairing);
	// nil where the bot needs none.
	pair  func(ctx context.Context, chats []int64) error
	close func()
}

func run(ctx context.Context, c config, side string) (result, error) {
	loadBefore := loadAvg()
	srv, err := botapitest.Start(ctx, botapitest.Options{Dir: ".", Typing: true})
	if err != nil {
		return result{}, err
	}
	defer srv.Close()
	tmp, err := os.MkdirTemp("", "tgbench")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(tmp)
	var b *bridge
	switch side {
	case "connector":
		b, err = startConnector(ctx, c, srv, tmp)
	case "chatsdk":
		b, err = startChatSDK(ctx, c, srv)
	default:
		err = fmt.Errorf("no side %q (connector, chatsdk)", side)
	}
	if err != nil {
		return result{}, err
	}
	defer b.close()
	pid := b.cmd.Process.Pid
	time.Sleep(2 * time.Second) // settled: what it holds idle
	idle, err := readMem(pid)
	if err != nil {
		return result{}, err
	}
	chats := make([]int64, c.chats)
	for i := range chats {
		chats[i] = int64(i + 1)
	}
	if b.pair != nil {
		if err := b.pair(ctx, chats); err != nil {
			return result{}, fmt.Errorf("pairing: %w", err)
		}
	}
	cpu0, err := readCPU(pid)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	for k := range c.each {
		for _, ch := range chats {
			if err := srv.Say(ctx, ch, userText(ch, k)); err != nil {
				return result{}, err
			}
		}
	}
	want := func(ch int64) []string {
		var w []string
		for k := range c.each {
			w = append(w, reply(userText(ch, k)))
		}
		return w
	}
	// Done when every chat shows its last reply's final text (or the wait
	// ran out: what is shown then is measured as it is).
	var shown map[int64][]string
	for deadline := time.Now().Add(c.wait); ; {
		if shown, err = shownTexts(ctx, srv); err != nil {
			return result{}, err
		}
		if allLast(shown, chats, want) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	cpu1, err := readCPU(pid)
	if err != nil {
		return result{}, err
	}
	end, err := readMem(pid)
	if err != nil {
		return result{}, err
	}
	time.Sleep(2 * time.Second) // a late duplicate or edit would show by now
	if shown, err = shownTexts(ctx, srv); err != nil {
		return result{}, err
	}
	r := result{side: b.name, elapsed: elapsed, cpu: cpu1 - cpu0, idle: idle, end: end, load: [2]string{loadBefore, loadAvg()}}
	r.score(chats, want, shown)
	r.count(srv.Calls(), r.shownOnce+r.twice+r.outOfOrder)
	return r, ctx.Err()
}

// shownTexts returns the texts each chat shows, oldest first.
func shownTexts(ctx context.Context, srv *botapitest.Server) (map[int64][]string, error) {
	shown, err := srv.Shown(ctx)
	out := map[int64][]string{}
	for chat, ms := range shown {
		for _, m := range ms {
			out[chat] = append(out[chat], m.Text)
		}
	}
	return out, err
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

func userText(chat int64, k int) string { return fmt.Sprintf("c%d k%d", chat, k) }

func allLast(shown map[int64][]string, chats []int64, want func(int64) []string) bool {
	for _, ch := range chats {
		w := want(ch)
		if !slices.Contains(shown[ch], w[len(w)-1]) {
			return false
		}
	}
	return true
}

// startConnector builds the telegram command as an operator does and runs
// it with its shipped limits against srv, with the agent as xAgent.
func startConnector(ctx context.Context, c config, srv *botapitest.Server, tmp string) (*bridge, error) {
	bin := filepath.Join(tmp, "telegram-connector")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("go build: %w", err)
	}
	tokenFile := filepath.Join(tmp, "token")
	if err := os.WriteFile(tokenFile, []byte(botapitest.Token+"\n"), 0o600); err != nil {
		return nil, err
	}
	port, err := botapitest.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const apiKey = "bench-api-key-of-at-least-22-chars"
	cmd := exec.Command(bin, "-listen", addr, "-state", filepath.Join(tmp, "state"), "-token-file", tokenFile,
		"-server", srv.API, "-log-level", "info")
	cmd.Env = append(os.Environ(), "XAGENT_API_KEY="+apiKey)
	logs, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &bridge{name: "Connector (Go, examples/telegram)", cmd: cmd}
	var ag *agent
	b.close = func() {
		if ag != nil {
			ag.close()
		}
		stopProcess(cmd)
	}
	if err := botapitest.WaitLine(ctx, logs, "listening on", time.Minute); err != nil {
		b.close()
		return nil, fmt.Errorf("the Connector did not start: %w", err)
	}
	b.pair = func(ctx context.Context, chats []int64) error {
		var err error
		if ag, err = startAgent(ctx, addr, apiKey, c.chunks, c.gap); err != nil {
			return err
		}
		for _, ch := range chats {
			if err := ag.pair(ctx, srv, ch); err != nil {
				return err
			}
		}
		return nil
	}
	return b, nil
}

// startChatSDK runs bench/bot.mjs against srv.
func startChatSDK(ctx context.Context, c config, srv *botapitest.Server) (*bridge, error) {
	args := []string{"bench/bot.mjs"}
	if c.peerProfile != "" {
		args = append([]string{"--cpu-prof", "--cpu-prof-dir=" + c.peerProfile}, args...)
	}
	cmd := exec.Command("node", args...)
	cmd.Env = append(os.Environ(), "BENCH_API="+srv.API, "BENCH_TOKEN="+botapitest.Token, "BENCH_CHUNKS="+itoa(int64(c.chunks)),
		"BENCH_GAP_MS="+itoa(c.gap.Milliseconds()), "BENCH_EDIT_MS="+itoa(perChat.Milliseconds()),
		"BENCH_CONCURRENCY="+c.peerConcurrency)
	if c.peerPlaceholder {
		cmd.Env = append(cmd.Env, "BENCH_PLACEHOLDER=default")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr // its warnings: failed calls show in the run's log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &bridge{name: "Chat SDK bot (chat + @chat-adapter/telegram 4.41.1, " + c.peerConcurrency + ")", cmd: cmd, close: func() { stopProcess(cmd) }}
	if err := botapitest.WaitLine(ctx, out, "ready", time.Minute); err != nil {
		b.close()
		return nil, fmt.Errorf("bot.mjs did not start: %w", err)
	}
	return b, nil
}

// stopProcess sends SIGTERM and kills what is left after 10 s.
func stopProcess(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}
