package imv2_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// What counts as a citation. A rule ID is a family letter and one or two
// digits standing alone ("(M12)", "K6.c", "A1–A8"; not "A1B2" or "x_A1");
// in a test function's name it is one underscore-separated part
// (TestDelta_D4_X4_GapRejected). A section citation names its text
// ("Common Protocol §8.2", "Common Protocol 3.0 §12", "profile §6, §10");
// a bare "§" or one of the
// old pointers to an outside document ("PROTO", "ARCH", "REQUIREMENTS")
// resolves nowhere.
var (
	ruleIDInText   = regexp.MustCompile(`(?:^|[^A-Za-z0-9_$])([PIEMDACSXWHTK][1-9][0-9]?)`) // and no word character after: see ruleIDs
	ruleIDInName   = regexp.MustCompile(`^[PIEMDACSXWHTK][1-9][0-9]?$`)
	sectionCite    = regexp.MustCompile(`([Pp]rofile|Common Protocol(?: 3\.0)?|Connector Architecture|RFC [0-9]+) ((?:§[0-9]+(?:\.[0-9]+)*(?:, | ?– ?| and | or )?)+)`)
	sectionNumber  = regexp.MustCompile(`§([0-9]+(?:\.[0-9]+)*)`)
	deadPointer    = regexp.MustCompile(`\b(PROTO|ARCH|REQUIREMENTS)\b`)
	ruleLine       = regexp.MustCompile(`^- ([PIEMDACSXWHTK][0-9]{1,2}) (.+) \(((?:profile|Common Protocol|Connector Architecture) §.+)\)$`)
	ruleLineLoose  = regexp.MustCompile(`^- [PIEMDACSXWHTK][0-9]`)
	sectionsLine   = regexp.MustCompile(`^- (profile|Common Protocol|Connector Architecture): (.+)$`)
	testFuncPrefix = regexp.MustCompile(`^(Test|Fuzz|Benchmark|Example)`)
)

// notCitations are the places that spell an ID-shaped word on purpose
// without citing a rule, per file (slash-separated path from the root).
var notCitations = map[string][]string{
	"imv2test/coverage_test.go": {"K13"}, // the script loader must refuse a check named after no rule
}

// selfSkipped are the files the walk leaves out: the checker, whose
// patterns and messages spell every form it rejects, and its fixtures.
var selfSkipped = []string{"rules_test.go", "testdata/rules"}

// ruleBook is what RULES.md defines: the rule IDs and, per public text,
// the sections one may cite.
type ruleBook struct {
	ids      map[string]bool
	sections map[string]map[string]bool // "profile" → "5" → true
}

// readRuleBook parses a rules document; problems are the lines that look
// like rules but break the format, repeated IDs, and rules whose source
// section the document's section list lacks.
func readRuleBook(path string) (ruleBook, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return ruleBook{}, nil, err
	}
	defer f.Close()
	book := ruleBook{ids: map[string]bool{}, sections: map[string]map[string]bool{}}
	var problems []string
	type source struct {
		line int
		text string
	}
	var sources []source
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := sectionsLine.FindStringSubmatch(line); m != nil {
			set := map[string]bool{}
			for _, s := range sectionNumber.FindAllStringSubmatch(m[2], -1) {
				set[s[1]] = true
			}
			book.sections[m[1]] = set
			continue
		}
		if !ruleLineLoose.MatchString(line) {
			continue
		}
		m := ruleLine.FindStringSubmatch(line)
		if m == nil {
			problems = append(problems, fmt.Sprintf("%s:%d: a rule line is `- ID text (source §N)`: %q", path, n, line))
			continue
		}
		if book.ids[m[1]] {
			problems = append(problems, fmt.Sprintf("%s:%d: rule %s is defined twice", path, n, m[1]))
		}
		book.ids[m[1]] = true
		sources = append(sources, source{n, m[3]})
	}
	if err := sc.Err(); err != nil {
		return ruleBook{}, nil, err
	}
	for _, s := range sources {
		for _, p := range book.badSections(s.text) {
			problems = append(problems, fmt.Sprintf("%s:%d: %s", path, s.line, p))
		}
	}
	return book, problems, nil
}

// badSections lists the section citations in text that resolve nowhere:
// a section the book does not list, or a § that names no text.
func (b ruleBook) badSections(text string) []string {
	var bad []string
	covered := make([]bool, len(text))
	for _, m := range sectionCite.FindAllStringSubmatchIndex(text, -1) {
		for i := m[0]; i < m[1]; i++ {
			covered[i] = true
		}
		src := text[m[2]:m[3]]
		switch {
		case strings.HasPrefix(src, "RFC "):
			continue // an RFC is its own authority
		case src == "Profile":
			src = "profile"
		case src == "Common Protocol 3.0":
			src = "Common Protocol"
		}
		for _, s := range sectionNumber.FindAllStringSubmatch(text[m[4]:m[5]], -1) {
			if !b.sections[src][s[1]] {
				bad = append(bad, fmt.Sprintf("%s §%s is not in the rule document's section list", src, s[1]))
			}
		}
	}
	for i := strings.Index(text, "§"); i >= 0; {
		if !covered[i] {
			bad = append(bad, fmt.Sprintf("%q cites a section of no named text (profile, Common Protocol, Connector Architecture)", around(text, i)))
		}
		next := strings.Index(text[i+len("§"):], "§")
		if next < 0 {
			break
		}
		i += len("§") + next
	}
	return bad
}

// ruleIDs are the rule IDs text cites. The pattern leaves the character
// after an ID unconsumed (Go's regexp has no lookahead) so that in
// "P1 S11" or "K1–K12" the separator still starts the next match.
func ruleIDs(text string) []string {
	var ids []string
	for _, m := range ruleIDInText.FindAllStringSubmatchIndex(text, -1) {
		if end := m[3]; end < len(text) {
			if c := text[end]; c == '_' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' {
				continue
			}
		}
		ids = append(ids, text[m[2]:m[3]])
	}
	return ids
}

// around is the text near byte i, for a readable message.
func around(text string, i int) string {
	lo, hi := max(0, i-24), min(len(text), i+24)
	return strings.ToValidUTF8(strings.Join(strings.Fields(text[lo:hi]), " "), "")
}

// citationProblems walks every .go, .md and .txtar file under root (but
// hidden folders and the skip paths, relative to root) and reports each
// citation the book does not resolve, as "path:line: …".
func citationProblems(root string, book ruleBook, skip ...string) ([]string, error) {
	var problems []string
	var file string // slash-separated, relative to root
	check := func(pos string, text string) {
		for _, id := range ruleIDs(text) {
			if !book.ids[id] && !slices.Contains(notCitations[file], id) {
				problems = append(problems, fmt.Sprintf("%s: cites %s, which the rule document lacks", pos, id))
			}
		}
		for _, m := range deadPointer.FindAllString(text, -1) {
			problems = append(problems, fmt.Sprintf("%s: cites %s, a document outside the repository", pos, m))
		}
		for _, p := range book.badSections(text) {
			problems = append(problems, pos+": "+p)
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		file = filepath.ToSlash(rel)
		if slices.Contains(skip, file) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
				return filepath.SkipDir // hidden, or others' packages (npm)
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go":
			return checkGoFile(path, check)
		case ".md", ".txtar":
			if d.Name() == "RULES.md" {
				return nil // the definitions themselves
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for n, line := range strings.Split(string(data), "\n") {
				check(fmt.Sprintf("%s:%d", path, n+1), line)
			}
		}
		return nil
	})
	return problems, err
}

// checkGoFile hands check every comment, every string literal and the
// rule-ID parts of every test function's name in the Go file at path.
func checkGoFile(path string, check func(pos, text string)) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	at := func(p token.Pos) string {
		pos := fset.Position(p)
		return fmt.Sprintf("%s:%d", pos.Filename, pos.Line)
	}
	for _, g := range f.Comments {
		for _, c := range g.List {
			check(at(c.Pos()), c.Text)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				if s, err := strconv.Unquote(n.Value); err == nil {
					check(at(n.Pos()), s)
				}
			}
		case *ast.FuncDecl:
			if n.Recv == nil && testFuncPrefix.MatchString(n.Name.Name) {
				for _, part := range strings.Split(n.Name.Name, "_")[1:] {
					if ruleIDInName.MatchString(part) {
						check(at(n.Pos()), part)
					}
				}
			}
		}
		return true
	})
	return nil
}

// TestRules_EveryCitationResolves: every rule ID and section that a
// comment, a string (error messages, check tables) or a test name in the
// repository cites is defined in RULES.md, the repository's own rule list.
func TestRules_EveryCitationResolves(t *testing.T) {
	book, problems, err := readRuleBook("RULES.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(book.ids) < 100 {
		t.Fatalf("RULES.md defines %d rules; the parser lost some", len(book.ids))
	}
	cited, err := citationProblems(".", book, selfSkipped...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(problems, cited...) {
		t.Error(p)
	}
}

// TestRules_BrokenFixtureFails runs the same check over a fixture whose
// rule document and code are wrong in every way the check knows, and
// wants each fault reported: the check can fail.
func TestRules_BrokenFixtureFails(t *testing.T) {
	dir := filepath.Join("testdata", "rules", "broken")
	book, problems, err := readRuleBook(filepath.Join(dir, "RULES.md"))
	if err != nil {
		t.Fatal(err)
	}
	cited, err := citationProblems(dir, book)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(append(problems, cited...), "\n")
	want, err := os.ReadFile(filepath.Join(dir, "want.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got != strings.TrimSpace(filepath.FromSlash(string(want))) {
		t.Errorf("problems found:\n%s\n\nwant (%s):\n%s", got, filepath.Join(dir, "want.txt"), want)
	}
}
