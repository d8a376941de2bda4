package connector_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadme_ExampleIsTheRealThing: the README's "A whole Connector" code
// is example_kit_test.go to the byte, so the sketch readers copy is the
// one go test compiles and runs, and it stays within 40 lines.
func TestReadme_ExampleIsTheRealThing(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_kit_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := readmeMatches(string(readme), string(example)); err != "" {
		t.Fatal(err)
	}
}

// TestReadme_MismatchIsReported: the check fails on a README that drifted
// and on an example that grew past 40 lines.
func TestReadme_MismatchIsReported(t *testing.T) {
	example := "package connector_test\n\nfunc Example() {}\n"
	if readmeMatches("```go\npackage connector_test\n\nfunc Example() { /* edited */ }\n```\n", example) == "" {
		t.Error("a drifted README passed")
	}
	long := "package connector_test\n" + strings.Repeat("//\n", 40)
	if readmeMatches("```go\n"+long+"```\n", long) == "" {
		t.Error("a 41-line example passed")
	}
}

func readmeMatches(readme, example string) string {
	const open = "```go\npackage connector_test\n"
	i := strings.Index(readme, open)
	if i < 0 {
		return "README.md has no ```go block starting with package connector_test"
	}
	block := readme[i+len("```go\n"):]
	j := strings.Index(block, "```")
	if j < 0 {
		return "README.md's example block is not closed"
	}
	if block[:j] != example {
		return "README.md's example differs from connector/example_kit_test.go: copy the file into the README"
	}
	if n := strings.Count(strings.TrimRight(example, "\n"), "\n") + 1; n > 40 {
		return "the README example has more than 40 lines"
	}
	return ""
}
