package imv2test

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Side names the implementation under test.
type Side string

// The two sides the suite can test.
const (
	// SideConnector: the suite plays xAgent against a Connector URL.
	SideConnector Side = "connector"
	// SideXAgent: the suite plays a Connector against an xAgent-side
	// implementation that dials it.
	SideXAgent Side = "xagent"
)

// Requirements a check may state with "needs"; a run that cannot meet one
// reports the check as skipped (not passed, not failed) with the reason.
const (
	NeedObserver = "observer"     // the Connector's target side effects (Connector.Observer)
	NeedUser     = "user"         // a way to make the Connector send a user message (Connector.User)
	NeedAPIKey   = "api-key"      // the Connector was started with an API key
	NeedBuffered = "buffered"     // the target cannot stream (Connector.Buffered)
	NeedStreams  = "streams"      // the target shows temporary text (not Connector.Buffered)
	NeedDeltaTTL = "delta-ttl"    // the Connector declared its delta idle TTL
	NeedActTTL   = "activity-ttl" // the Connector declared its activity timeout
	NeedTyping   = "typing"       // the target has a typing indicator (RunKit: the platform is a connector.Typer)
)

var knownNeeds = []string{NeedObserver, NeedUser, NeedAPIKey, NeedBuffered, NeedStreams, NeedDeltaTTL, NeedActTTL, NeedTyping}

// Check is one named conformance check: a script of packets to send and
// packets (or target side effects) expected back, and the rule IDs of
// RULES.md it exercises.
type Check struct {
	// Name is "K<n>" plus a sub-check suffix: K2.a, K11.x.b …
	Name string
	// Title is one line saying what the check proves.
	Title string
	// Rules are the rule IDs the check exercises (P3, D4, K2 …).
	Rules []string
	// Needs lists what the run must provide (observer, user, …).
	Needs []string
	// Side is the implementation the check tests.
	Side Side
	// File is the txtar file the check comes from.
	File string

	line  int // of the section marker
	steps []step
	// cardProfiles, when set (directive card-profiles, xAgent side), are
	// the supports.profiles of the Card the suite's Connector serves for
	// the check; default xagent.im.v2.
	cardProfiles []string
	files        map[string][]byte
}

type step struct {
	line int
	text string
}

//go:embed testdata/conformance
var scriptFS embed.FS

var checkName = regexp.MustCompile(`^K([1-9]|1[0-2])(\.[a-z0-9]+)+$`)

// Checks returns the checks of side, in order (K1 before K2 before K10,
// sub-checks alphabetically). They are parsed from the txtar scripts
// embedded from testdata/conformance/<side>/.
func Checks(side Side) ([]*Check, error) {
	return loadChecks(scriptFS, path.Join("testdata/conformance", string(side)), side)
}

func loadChecks(fsys fs.FS, dir string, side Side) ([]*Check, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []*Check
	seen := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".txtar") {
			continue
		}
		file := path.Join(dir, e.Name())
		data, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, err
		}
		checks, err := parseChecks(file, data, side)
		if err != nil {
			return nil, err
		}
		for _, c := range checks {
			if seen[c.Name] {
				return nil, fmt.Errorf("%s: check %s defined twice", file, c.Name)
			}
			seen[c.Name] = true
		}
		out = append(out, checks...)
	}
	slices.SortFunc(out, func(a, b *Check) int { return compareNames(a.Name, b.Name) })
	return out, nil
}

// compareNames orders K2.a before K10.a.
func compareNames(a, b string) int {
	na, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(a, "K"), ".", 2)[0])
	nb, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(b, "K"), ".", 2)[0])
	if na != nb {
		return na - nb
	}
	return strings.Compare(a, b)
}

// parseChecks reads one txtar file: every section named like a check is a
// script, every other section a data file the scripts may use.
func parseChecks(file string, data []byte, side Side) ([]*Check, error) {
	a := parseArchive(data)
	files := map[string][]byte{}
	for _, f := range a.files {
		if !strings.HasPrefix(f.name, "K") {
			files[f.name] = f.data
		}
	}
	var out []*Check
	for _, f := range a.files {
		if !strings.HasPrefix(f.name, "K") {
			continue
		}
		if !checkName.MatchString(f.name) {
			return nil, fmt.Errorf("%s:%d: section %q is not a check name (K<1-12>.<sub>)", file, f.line, f.name)
		}
		c := &Check{Name: f.name, Side: side, File: file, line: f.line, files: files}
		if err := c.parseBody(f.line, string(f.data)); err != nil {
			return nil, fmt.Errorf("%s:%w", file, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// parseBody reads the directives (title, rules, needs, card-profiles) and
// the commands.
// Commands are checked for a known verb here, so a typo fails at load
// time rather than in the middle of a run.
func (c *Check) parseBody(first int, body string) error {
	for i, line := range strings.Split(body, "\n") {
		n := first + 1 + i
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verb, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch verb {
		case "title":
			c.Title = rest
			continue
		case "rules":
			c.Rules = append(c.Rules, strings.Fields(rest)...)
			continue
		case "card-profiles":
			if c.Side != SideXAgent {
				return fmt.Errorf("%d: card-profiles is for xAgent-side checks", n)
			}
			c.cardProfiles = append(c.cardProfiles, strings.Fields(rest)...)
			continue
		case "needs":
			for _, nd := range strings.Fields(rest) {
				if !slices.Contains(knownNeeds, nd) {
					return fmt.Errorf("%d: unknown need %q", n, nd)
				}
				c.Needs = append(c.Needs, nd)
			}
			continue
		}
		if !knownVerb(c.Side, verb) {
			return fmt.Errorf("%d: unknown command %q", n, verb)
		}
		c.steps = append(c.steps, step{line: n, text: line})
	}
	switch {
	case c.Title == "":
		return fmt.Errorf("%d: check %s has no title", first, c.Name)
	case len(c.Rules) == 0:
		return fmt.Errorf("%d: check %s lists no rules", first, c.Name)
	case len(c.steps) == 0:
		return fmt.Errorf("%d: check %s has no commands", first, c.Name)
	}
	return nil
}
