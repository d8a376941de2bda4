package consolebridge

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
)

// script drives a printer the way the kit does in mode stream or edit:
// drafts (Draft, or PostDraft then Edit) with the handle the printer gave,
// finals through Finish when a draft was shown, else Post.
type script struct {
	t       *testing.T
	p       *printer
	edit    bool
	handles map[string]string
	shown   map[string]string
}

var to = connector.Conversation{ChannelID: "ch", Key: "ch"}

func newScript(t *testing.T, p *printer, edit bool) *script {
	return &script{t: t, p: p, edit: edit, handles: map[string]string{}, shown: map[string]string{}}
}

func (s *script) draft(id, text string) {
	ctx, h := context.Background(), s.handles[id]
	var err error
	switch {
	case !s.edit:
		d := connector.Draft{MessageID: id, Handle: h, Text: text, Suffix: strings.TrimPrefix(text, s.shown[id])}
		d.Reset = !strings.HasPrefix(text, s.shown[id])
		h, err = s.p.Draft(ctx, to, d)
	case h == "":
		h, err = s.p.PostDraft(ctx, to, id, text)
	default:
		err = s.p.Edit(ctx, to, h, text)
	}
	require.NoError(s.t, err)
	s.handles[id], s.shown[id] = h, text
}

func (s *script) final(id, text string, files ...imv2.File) {
	m := &connector.Message{ChatMessage: &imv2.ChatMessage{MessageID: id, Text: text, Files: files}}
	if h := s.handles[id]; h != "" {
		require.NoError(s.t, s.p.Finish(context.Background(), to, h, m))
		return
	}
	require.NoError(s.t, s.p.Post(context.Background(), to, m))
}

func (s *script) typing(status imv2.ActivityStatus, tool string) {
	require.NoError(s.t, s.p.Typing(context.Background(), to, imv2.ChatActivity{Status: status, ToolName: tool}))
}

// run plays one conversation: a reply streamed with a typing line between
// its drafts, a tool in use, two replies interleaved, a draft replaced, an
// escape sequence cut across two drafts, a final that replaces its draft,
// finals with files, and a user message sent and one failed.
func (s *script) run() {
	s.draft("m1", "Hel")
	s.draft("m1", "Hello")
	s.typing(imv2.ActivityThinking, "")
	s.draft("m1", "Hello wor")
	s.typing(imv2.ActivityIdle, "")
	s.typing(imv2.ActivityIdle, "")
	s.final("m1", "Hello world")
	s.draft("m2", "abc")
	s.typing(imv2.ActivityTool, "search\x1b[2J")
	s.draft("m3", "xyz")
	s.draft("m2", "abcdef")
	s.final("m3", "xyz!")
	s.final("m2", "abcdef")
	s.draft("m4", "aaa")
	s.draft("m4", "bbb")
	s.final("m4", "bbb")
	s.draft("m5", "esc \x1b]0;ti")
	s.draft("m5", "esc \x1b]0;title\x07 ok")
	s.final("m5", "esc \x1b]0;title\x07 ok done")
	s.draft("m6", "draft")
	s.final("m6", "other")
	s.final("m7", "a file", imv2.File{FileRef: "ref1", Type: imv2.FileFile, Filename: "a\x1b[31m.txt"})
	s.final("m8", "", imv2.File{FileRef: "ref2", Type: imv2.FileImage})
	s.p.delivered("ch", imv2.ChatMessage{MessageID: "u1", Text: "hi\x1b]0;x\x07"}, imv2.AckAccepted)
	s.p.delivered("ch", imv2.ChatMessage{MessageID: "u2", Files: []imv2.File{{Filename: "n.txt"}}}, imv2.AckAccepted)
	s.p.failed("ch", imv2.ChatMessage{MessageID: "u3"}, &imv2.Error{Code: imv2.CodeInvalidPacket})
}

// TestPrinter_PrettyChat: the chat a person sees. A message's text grows
// on its line; after a line of its own came between, it goes on after
// "agent › … " (in both modes) instead of printing the text again; the final
// completes the line when it extends it, else it is shown whole; no
// control sequence xAgent sent reaches the terminal. Going back to a
// message after another one's draft, a stream goes on with the new part
// (its Suffix), an edit shows the whole text again (the printer keeps the
// text of the last message drafted only).
func TestPrinter_PrettyChat(t *testing.T) {
	const want = "agent › Hello\n" +
		"        … agent is thinking\n" +
		"agent › …  world\n" +
		"agent › abc\n" +
		"        … agent is using search\n" +
		"agent › xyz\n" +
		"agent › %s\n" +
		"agent › xyz!\n" +
		"agent › abcdef\n" +
		"agent › aaa\n" +
		"        bbb\n" +
		"agent › esc  ok done\n" +
		"agent › draft\n" +
		"agent › other\n" +
		"agent › a file\n" +
		"        📎 a.txt (file)\n" +
		"agent › \n" +
		"        📎  (image)\n" +
		"you   ✓ hi\n" +
		"you   ✓ /file n.txt\n" +
		"you   ✗ not delivered (invalid_packet)\n"
	for edit, back := range map[bool]string{false: "… def", true: "abcdef"} {
		var out bytes.Buffer
		newScript(t, &printer{out: &out, credit: draftSlack}, edit).run()
		require.Equal(t, fmt.Sprintf(want, back), out.String(), "edit mode: %v", edit)
	}
}

// TestPrinter_JSONEvents: the -json contract, one object per line; a
// typing clear is printed only after a typing event.
func TestPrinter_JSONEvents(t *testing.T) {
	var out bytes.Buffer
	newScript(t, &printer{out: &out, json: true, credit: draftSlack}, false).run()
	lines := strings.Split(out.String(), "\n")
	require.Equal(t, `{"event":"draft","message_id":"m1","text":"Hel"}`, lines[0])
	require.Equal(t, `{"event":"typing","status":"thinking"}`, lines[2])
	require.Equal(t, `{"event":"typing_clear"}`, lines[4])
	require.Equal(t, `{"event":"final","message_id":"m1","text":"Hello world"}`, lines[5])
	require.Equal(t, `{"event":"typing","status":"tool","tool_name":"search\u001b[2J"}`, lines[7])
	require.Contains(t, out.String(), `{"event":"final","message_id":"m8","text":"","files":[{"file_ref":"ref2","type":"image","filename":""}]}`+"\n")
	require.Contains(t, out.String(), `{"event":"sent","message_id":"u2","text":"/file n.txt"}`+"\n")
	require.True(t, strings.HasSuffix(out.String(), `{"event":"failed","message_id":"u3","code":"invalid_packet"}`+"\n"))
	require.Equal(t, 1, strings.Count(out.String(), "typing_clear"))

	out.Reset()
	newScript(t, &printer{out: &out, json: true, credit: draftSlack}, true).run()
	require.True(t, strings.HasPrefix(out.String(), `{"event":"post","message_id":"m1","text":"Hel"}`+"\n"+`{"event":"edit","message_id":"m1","text":"Hello"}`+"\n"))
}

// TestPrinter_D8_JSONDraftsBounded: -json draft events carry the whole
// text so far, so they are budgeted: the drafts of a short reply are all
// printed, and two replies streamed interleaved in 10-byte deltas print at
// most twice their text plus draftSlack in draft events, not each text
// once per delta.
func TestPrinter_D8_JSONDraftsBounded(t *testing.T) {
	var out bytes.Buffer
	s := newScript(t, &printer{out: &out, json: true, credit: draftSlack}, false)
	for i := 1; i <= 20; i++ {
		s.draft("short", strings.Repeat("x", 10*i))
	}
	s.final("short", "done")
	require.Equal(t, 20, strings.Count(out.String(), `"event":"draft"`), "a short reply shows every draft")

	out.Reset()
	text := strings.Repeat("0123456789", 20_000)
	for i := 10; i <= len(text); i += 10 {
		s.draft("a", text[:i])
		s.draft("b", text[:i])
	}
	drafts := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, `"event":"draft"`) {
			drafts += len(l) - len(`{"event":"draft","message_id":"a","text":""}`)
		}
	}
	require.LessOrEqual(t, drafts, 2*2*len(text)+draftSlack)
	require.Contains(t, out.String(), `"text":"0123456789"}`, "the first drafts are shown")
}
