package consolebridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/protocol"
)

// Event is one line of the -json contract on stdout.
type Event struct {
	Event     string      `json:"event"`
	MessageID string      `json:"message_id,omitempty"`
	Text      *string     `json:"text,omitempty"`
	Files     []EventFile `json:"files,omitempty"`
	Status    string      `json:"status,omitempty"`
	ToolName  string      `json:"tool_name,omitempty"`
	Code      string      `json:"code,omitempty"`
}

// EventFile is one file of a final event.
type EventFile struct {
	FileRef  string `json:"file_ref"`
	Type     string `json:"type"`
	Filename string `json:"filename"`
}

// printer is the console "IM platform": a connector.Platform with every
// capability (Drafter, Editor, Finisher, Typer; the mode picks) whose
// handles are message_ids. Every call becomes one Event, printed as a JSON
// line (the contract external tests read) or as a pleasant chat.
type printer struct {
	mu     sync.Mutex
	out    io.Writer
	json   bool
	credit int         // -json: draft bytes that may still be printed (see draftSlack)
	typing atomic.Bool // a typing event was printed and not cleared
	// Pretty: the message drafted last, its text as xAgent sent it, the
	// escape-sequence state at its end, and whether it is on the open line.
	cur, raw string
	term     termFilter
	open     bool
}

// draftSlack is the -json draft budget besides twice the text: the credit
// grows by two bytes per byte of new draft text and shrinks by the size of
// each draft printed, and each final sets it back to draftSlack. So the
// drafts of one message add up to at most 2×text + draftSlack bytes: a
// short reply shows every draft, and 1 MiB of 10-byte deltas does not
// print the whole text 100,000 times (D8).
const draftSlack = 4 << 10

// emit prints e: a JSON line, or for a person. d is the draft behind a
// "draft" event.
func (p *printer) emit(e Event, d *connector.Draft) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case e.Event == "draft" && p.json:
		if p.credit += 2 * len(d.Suffix); len(d.Text) > p.credit {
			return
		}
		p.credit -= len(d.Text)
	case e.Event == "final":
		p.credit = draftSlack
	}
	if p.json {
		b, _ := json.Marshal(e)
		fmt.Fprintf(p.out, "%s\n", b)
		return
	}
	text := ""
	if e.Text != nil {
		text = *e.Text
	}
	switch e.Event {
	case "draft", "post", "edit":
		p.grow(e.MessageID, text, d)
	case "final":
		if p.open && p.cur == e.MessageID && strings.HasPrefix(text, p.raw) {
			fmt.Fprintln(p.out, p.term.clean(text[len(p.raw):])) // the final completes the streamed line (M11)
			p.open = false
		} else {
			p.endLine()
			fmt.Fprintf(p.out, "agent › %s\n", cleanTerm(text))
		}
		for _, f := range e.Files {
			fmt.Fprintf(p.out, "        📎 %s (%s)\n", cleanTerm(f.Filename), cleanTerm(f.Type))
		}
	case "typing":
		what := "thinking"
		if e.Status == string(imv2.ActivityTool) {
			what = "using " + cleanTerm(e.ToolName)
		}
		p.line("        … agent is %s\n", what)
	case "sent":
		p.line("you   ✓ %s\n", cleanTerm(text))
	case "failed":
		p.line("you   ✗ not delivered (%s)\n", cleanTerm(e.Code))
	}
}

// grow prints the part of a message's text not shown yet, without control
// sequences: on the message's line, or on a new one ("agent › … " when
// other lines came between). A draft's Suffix is that part, so a delta
// costs no O(n) comparison; for an edit it is found by one.
func (p *printer) grow(id, text string, d *connector.Draft) {
	suffix, more := text, false // more: suffix extends the text shown
	switch {
	case d != nil:
		suffix, more = d.Suffix, d.Handle != "" && !d.Reset
	case id == p.cur && strings.HasPrefix(text, p.raw):
		suffix, more = text[len(p.raw):], p.raw != ""
	}
	if !more || id != p.cur {
		p.term = termFilter{}
	}
	switch {
	case !p.open || id != p.cur:
		p.endLine()
		fmt.Fprint(p.out, "agent › ")
		if more {
			fmt.Fprint(p.out, "… ")
		}
	case !more: // the text changed: show it anew
		fmt.Fprint(p.out, "\n        ")
	}
	p.cur, p.raw, p.open = id, text, true
	fmt.Fprint(p.out, p.term.clean(suffix))
}

// line prints a line of its own.
func (p *printer) line(format string, arg string) {
	p.endLine()
	fmt.Fprintf(p.out, format, arg)
}

func (p *printer) endLine() {
	if p.open {
		fmt.Fprintln(p.out)
		p.open = false
	}
}

func finalEvent(m *imv2.ChatMessage) Event {
	e := Event{Event: "final", MessageID: m.MessageID, Text: &m.Text}
	for _, f := range m.Files {
		e.Files = append(e.Files, EventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
	}
	return e
}

// Post implements connector.Platform (buffer mode, and any final without a draft).
func (p *printer) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p.emit(finalEvent(m.ChatMessage), nil)
	return nil
}

// Finish implements connector.Finisher: the final of a drafted message,
// printed as one final event (not an edit) in every mode.
func (p *printer) Finish(ctx context.Context, to connector.Conversation, _ string, m *connector.Message) error {
	return p.Post(ctx, to, m)
}

// Draft implements connector.Drafter (mode stream).
func (p *printer) Draft(_ context.Context, _ connector.Conversation, d connector.Draft) (string, error) {
	p.emit(Event{Event: "draft", MessageID: d.MessageID, Text: &d.Text}, &d)
	return d.MessageID, nil
}

// PostDraft implements connector.Editor (mode edit).
func (p *printer) PostDraft(_ context.Context, _ connector.Conversation, messageID, text string) (string, error) {
	p.emit(Event{Event: "post", MessageID: messageID, Text: &text}, nil)
	return messageID, nil
}

// Edit implements connector.Editor.
func (p *printer) Edit(_ context.Context, _ connector.Conversation, messageID, text string) error {
	p.emit(Event{Event: "edit", MessageID: messageID, Text: &text}, nil)
	return nil
}

// Typing implements connector.Typer: the status and tool name, and a clear
// of what was shown.
func (p *printer) Typing(_ context.Context, _ connector.Conversation, a imv2.ChatActivity) error {
	if a.Status != imv2.ActivityIdle {
		p.typing.Store(true)
		p.emit(Event{Event: "typing", Status: string(a.Status), ToolName: a.ToolName}, nil)
	} else if p.typing.Swap(false) { // a clear only of a typing event printed
		p.emit(Event{Event: "typing_clear"}, nil)
	}
	return nil
}

// Invoke serves console_message_send (dataplane.ToolHandler).
func (p *printer) Invoke(_ context.Context, _ string, req protocol.ToolInvoke) (json.RawMessage, error) {
	var args struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.Arguments, &args); err != nil || args.Text == "" || req.ToolID != ToolSend {
		return nil, imv2.Errorf(protocol.CodeToolInvokeFailed, "tool %q needs text", req.ToolID)
	}
	id := imv2.NewMessageID()
	p.emit(finalEvent(&imv2.ChatMessage{MessageID: id, Text: args.Text}), nil)
	return json.RawMessage(fmt.Sprintf(`{"status":"sent","message_id":%q}`, id)), nil
}

func (p *printer) delivered(_ string, m imv2.ChatMessage, _ imv2.AckStatus) {
	if m.Text == "" && len(m.Files) > 0 {
		m.Text = "/file " + m.Files[0].Filename
	}
	p.emit(Event{Event: "sent", MessageID: m.MessageID, Text: &m.Text}, nil)
}

func (p *printer) failed(_ string, m imv2.ChatMessage, err *imv2.Error) {
	p.emit(Event{Event: "failed", MessageID: m.MessageID, Code: string(err.Code)}, nil)
}
