package dataplane_test

import (
	"fmt"
	"go/format"
	"os"
	"strings"
	"testing"
)

// TestReadme_AgentExampleIsTheRealThing: the README's "The xAgent side"
// code is example_agent_test.go to the byte, so the code readers copy is
// the one go test compiles and runs; it is gofmt'd and no line is over
// 100 columns.
func TestReadme_AgentExampleIsTheRealThing(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_agent_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := readmeMatches(string(readme), string(example)); err != "" {
		t.Fatal(err)
	}
}

// TestReadme_AgentMismatchIsReported: the check fails on a README that
// drifted, on an example gofmt would change and on a line over 100
// columns.
func TestReadme_AgentMismatchIsReported(t *testing.T) {
	example := "package dataplane_test\n\nfunc Example_agent() {}\n"
	if readmeMatches("```go\npackage dataplane_test\n\nfunc Example_agent() { /* edited */ }\n```\n", example) == "" {
		t.Error("a drifted README passed")
	}
	for name, bad := range map[string]string{
		"not gofmt'd": "package dataplane_test\n\nfunc  Example_agent() {}\n",
		"wide":        "package dataplane_test\n\n// " + strings.Repeat("x", 98) + "\n",
	} {
		if readmeMatches("```go\n"+bad+"```\n", bad) == "" {
			t.Errorf("a %s example passed", name)
		}
	}
}

func readmeMatches(readme, example string) string {
	const open = "```go\npackage dataplane_test\n"
	i := strings.Index(readme, open)
	if i < 0 {
		return "README.md has no ```go block starting with package dataplane_test"
	}
	block := readme[i+len("```go\n"):]
	j := strings.Index(block, "```")
	if j < 0 {
		return "README.md's example block is not closed"
	}
	if block[:j] != example {
		return "README.md's xAgent example differs from dataplane/example_agent_test.go: copy the file into the README"
	}
	if formatted, err := format.Source([]byte(example)); err != nil || string(formatted) != example {
		return "dataplane/example_agent_test.go is not gofmt'd"
	}
	for i, line := range strings.Split(example, "\n") {
		// A tab counts four columns, as the README renders it.
		if len([]rune(strings.ReplaceAll(line, "\t", "    "))) > 100 {
			return fmt.Sprintf("the README example's line %d is over 100 columns", i+1)
		}
	}
	return ""
}
