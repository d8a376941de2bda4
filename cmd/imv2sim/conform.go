package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xagentkit/imv2/imv2test"
)

const conformUsage = `usage: imv2sim conform -connector URL [-api-key KEY] [-json] [flags]
       imv2sim conform -exec "CMD ARGS…" [flags]

Runs the xagent.im.v2 conformance suite (checks K1–K12, package imv2test)
against a Connector, prints one row per check (check, rule IDs, result,
reason) and exits non-zero when a check fails. Checks that need to see the
Connector's target side are skipped without an observer: -exec starts a
command that provides one, under this contract:

  stderr   a line "listening on URL" (the Connector's base URL), or, as
           with -log-format json, a log/slog JSON record whose msg is
           "listening on URL" (or "listening on") and whose "url" is the
           URL: {"level":"INFO","msg":"listening on URL","url":URL}
  stdout   one JSON object per line for everything the platform shows:
             {"event":"final","message_id":ID,"text":T,
              "files":[{"file_ref":R,"type":"file","filename":N}]}
             {"event":"draft"|"post"|"edit","message_id":ID,"text":T}
                 draft: a native draft (mode stream); post: a temporary
                 message (mode edit); edit: a later text of it
             {"event":"typing","status":"thinking"|"tool","tool_name":N}
             {"event":"typing_clear"}
             {"event":"sent"|"failed","message_id":ID,"text":T,"code":C}
                 a user message's fate (ack accepted, or given up)
  stdin    one user message per line: its text, or "/file PATH" for a
           file-only message
  -buffer  tells the suite the command shows no temporary text

examples/console -json is one such command:

  imv2sim conform -exec "go run ./examples/console -addr 127.0.0.1:0 -json -mode buffer" -buffer

A Connector built with connector.New writes the stdout events itself:
set Options.Advanced.Events to os.Stdout behind a flag of its own. In a Go
test it needs none of this: imv2test.RunKit(t, k, nil) runs the suite in
process and sees what the kit shows by itself.
`

// conform runs `imv2sim conform`; out gets the table, errOut the
// transcript with -v.
func conform(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("imv2sim conform", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprint(errOut, conformUsage)
		fs.PrintDefaults()
	}
	connector := fs.String("connector", "", "Connector base URL, e.g. http://127.0.0.1:8787")
	keys := defineKeyFlags(fs, "API key the Connector was started with (sent as a bearer token)")
	jsonOut := fs.Bool("json", false, "print one JSON object per check instead of the table")
	execCmd := fs.String("exec", "", "start this Connector command (split on spaces) and observe it; its URL is used unless -connector is set")
	buffered := fs.Bool("buffer", false, "the Connector's target cannot stream: check that no temporary text appears (K5)")
	runRe := fs.String("run", "", "run only the checks matching this regular expression")
	deltaTTL := fs.Duration("delta-ttl", 0, "the Connector's delta idle TTL, if short enough to observe (K6.c)")
	actTTL := fs.Duration("activity-timeout", 0, "the Connector's activity timeout, if short enough to observe (K12.d)")
	wait := fs.Duration("wait", 0, "longest wait for an expected packet or event (default 5s)")
	list := fs.Bool("list", false, "list the checks and the rules not observable over the wire, and exit")
	verbose := fs.Bool("v", false, "print a transcript on stderr: every step, and every ack with its status, code, retryable and the resend it caused")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *list {
		return listChecks(out)
	}
	apiKey, err := keys.read()
	if err != nil {
		return err
	}
	c := imv2test.Connector{URL: *connector, APIKey: apiKey, Buffered: *buffered, DeltaIdleTTL: *deltaTTL, ActivityTimeout: *actTTL}
	if *execCmd != "" {
		argv := strings.Fields(*execCmd)
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		p, err := imv2test.StartProcess(sctx, argv[0], argv[1:]...)
		cancel()
		if err != nil {
			return err
		}
		defer p.Close()
		pc := p.Connector()
		c.Observer, c.User = pc.Observer, pc.User
		if c.URL == "" {
			c.URL = pc.URL
		}
	}
	if c.URL == "" {
		fs.Usage()
		return errors.New("-connector or -exec is required")
	}
	cfg := &imv2test.Config{Run: *runRe, Wait: *wait}
	if *verbose {
		cfg.Log = errOut
	}
	rep, err := imv2test.CheckConnector(ctx, c, cfg)
	if err != nil {
		return err
	}
	if *jsonOut {
		err = rep.WriteJSON(out)
	} else {
		err = rep.WriteTable(out)
	}
	if err != nil {
		return err
	}
	if failed := rep.Failed(); len(failed) > 0 {
		return fmt.Errorf("conform: %d check(s) failed: %s", len(failed), strings.Join(failed, " "))
	}
	return nil
}

// listChecks prints every check of both sides and the rules no check can
// observe over the wire.
func listChecks(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSIDE\tRULES\tNEEDS\tTITLE")
	for _, side := range []imv2test.Side{imv2test.SideConnector, imv2test.SideXAgent} {
		checks, err := imv2test.Checks(side)
		if err != nil {
			return err
		}
		for _, c := range checks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, side, strings.Join(c.Rules, " "), strings.Join(c.Needs, " "), c.Title)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nNot observable over the wire:")
	for _, n := range imv2test.NotObservable() {
		fmt.Fprintf(out, "  %-4s %s\n", n.Rule, n.Why)
	}
	return nil
}
