package consolebridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/display"
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

// printer is the console "IM platform" (a connector.Platform and Typer;
// streamPlatform and editPlatform add the draft capabilities of the other
// modes): it shows every side effect, as JSON lines (the contract external
// tests read) or as a pleasant chat.
type printer struct {
	mu      sync.Mutex
	out     io.Writer
	json    bool
	live    string     // the draft on the current line: a stream handle, or a message_id (edit mode)
	shown   string     // edit mode: text of that draft printed so far
	term    termFilter // edit mode: escape-sequence state at the end of shown
	streams map[string]*stream
	typing  bool
	handles int
}

// stream is the output state of one native-stream draft (mode stream),
// keyed by its handle. The display package bounds the drafts open at once
// (display.DefaultMaxDrafts) and drops idle ones (DraftTTL, then Discard);
// maxStreams bounds this map besides.
type stream struct {
	raw     string     // the draft text accepted so far, as xAgent sent it
	emitted int        // -json: bytes of draft text printed for it so far
	term    termFilter // pretty: escape-sequence state at the end of raw
}

const (
	// maxStreams caps the streams the printer tracks; a draft beyond it is
	// not shown (its final is).
	maxStreams = 2 * display.DefaultMaxDrafts
	// draftSlack is the -json draft budget besides twice the text: the
	// draft events of one message add up to at most 2×text + draftSlack
	// bytes, so a short reply shows every draft and 1 MiB of 10-byte
	// deltas does not print the whole text 100,000 times.
	draftSlack = 4 << 10
)

func (p *printer) emit(e Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		p.writeJSON(e)
		return
	}
	p.pretty(e)
}

func (p *printer) writeJSON(e Event) {
	b, _ := json.Marshal(e)
	fmt.Fprintf(p.out, "%s\n", b)
}

// endLive ends the line a draft is growing on.
func (p *printer) endLive() {
	if p.live != "" {
		fmt.Fprintln(p.out)
		p.live, p.shown, p.term = "", "", termFilter{}
	}
}

// draft shows a native-stream draft (mode stream). -json prints the whole
// text so far (the contract) while the message's draft budget allows;
// pretty mode prints only the suffix new since the last draft, escape
// sequences removed, on the message's line ("agent › … " when another
// line came between).
func (p *printer) draft(handle string, d display.Draft) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.streams == nil {
		p.streams = make(map[string]*stream)
	}
	st := p.streams[handle]
	if st == nil {
		if len(p.streams) >= maxStreams {
			return
		}
		st = &stream{}
		p.streams[handle] = st
	}
	if p.json {
		if st.emitted <= len(d.Text)+draftSlack {
			p.writeJSON(Event{Event: "draft", MessageID: d.MessageID, Text: strp(d.Text)})
			st.emitted += len(d.Text)
		}
		st.raw = d.Text
		return
	}
	suffix := d.Suffix
	if d.Reset { // the display compared the texts: no second O(n) check per delta here
		suffix, st.term = d.Text, termFilter{} // the text changed: show it anew
		if p.live == handle {
			fmt.Fprint(p.out, "\n        ")
		}
	}
	if p.live != handle {
		p.endLive()
		fmt.Fprint(p.out, "agent › ")
		if st.raw != "" && suffix != d.Text {
			fmt.Fprint(p.out, "… ")
		}
		p.live = handle
	}
	fmt.Fprint(p.out, st.term.clean(suffix))
	st.raw = d.Text
}

// finish shows the final of a native-stream draft: in pretty mode the rest
// of the streamed line when the final extends it (M11), else the whole
// final on a line of its own.
func (p *printer) finish(handle string, m *imv2.ChatMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.streams[handle]
	delete(p.streams, handle)
	if p.json {
		p.writeJSON(finalEvent(m))
		return
	}
	if st != nil && p.live == handle && strings.HasPrefix(m.Text, st.raw) {
		fmt.Fprintln(p.out, st.term.clean(m.Text[len(st.raw):]))
		p.live = ""
	} else {
		p.endLive()
		fmt.Fprintf(p.out, "agent › %s\n", cleanTerm(m.Text))
	}
	p.files(m)
}

func (p *printer) files(m *imv2.ChatMessage) {
	for _, f := range m.Files {
		fmt.Fprintf(p.out, "        📎 %s (%s)\n", cleanTerm(f.Filename), cleanTerm(string(f.Type)))
	}
}

// discard forgets a draft the display dropped unfinished.
func (p *printer) discard(handle string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.streams, handle)
	if p.live == handle {
		p.endLive()
	}
}

// pretty renders an event for a human (edit and buffer mode, and the
// events of every mode but the stream drafts): streamed text grows on one
// line, only new text is written, and nothing xAgent sent reaches the
// terminal with its control sequences.
func (p *printer) pretty(e Event) {
	text := ""
	if e.Text != nil {
		text = *e.Text
	}
	switch e.Event {
	case "post", "edit":
		if p.live != e.MessageID {
			p.endLive()
			fmt.Fprint(p.out, "agent › ")
			p.live = e.MessageID
		}
		if rest, ok := strings.CutPrefix(text, p.shown); ok {
			fmt.Fprint(p.out, p.term.clean(rest))
		} else {
			p.term = termFilter{}
			fmt.Fprint(p.out, "\n        "+p.term.clean(text))
		}
		p.shown = text
	case "final":
		if rest, ok := strings.CutPrefix(text, p.shown); ok && p.live == e.MessageID {
			fmt.Fprintln(p.out, p.term.clean(rest)) // the final completes the streamed line (M11)
			p.live, p.shown, p.term = "", "", termFilter{}
		} else {
			p.endLive()
			fmt.Fprintf(p.out, "agent › %s\n", cleanTerm(text))
		}
		for _, f := range e.Files {
			fmt.Fprintf(p.out, "        📎 %s (%s)\n", cleanTerm(f.Filename), cleanTerm(f.Type))
		}
	case "typing":
		p.endLive()
		what := "thinking"
		if e.Status == string(imv2.ActivityTool) {
			what = "using " + cleanTerm(e.ToolName)
		}
		fmt.Fprintf(p.out, "        … agent is %s\n", what)
	case "typing_clear":
	case "sent":
		p.endLive()
		fmt.Fprintf(p.out, "you   ✓ %s\n", cleanTerm(text))
	case "failed":
		p.endLive()
		fmt.Fprintf(p.out, "you   ✗ not delivered (%s)\n", cleanTerm(e.Code))
	}
}

func strp(s string) *string { return &s }

func finalEvent(m *imv2.ChatMessage) Event {
	e := Event{Event: "final", MessageID: m.MessageID, Text: strp(m.Text)}
	for _, f := range m.Files {
		e.Files = append(e.Files, EventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
	}
	return e
}

func (p *printer) nextHandle(messageID string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.handles++
	return fmt.Sprintf("%s#%d", messageID, p.handles)
}

// messageOf strips the "#n" suffix nextHandle added.
func messageOf(handle string) string {
	if i := strings.LastIndexByte(handle, '#'); i > 0 {
		return handle[:i]
	}
	return handle
}

// Post implements connector.Platform (buffer mode, and any final without a draft).
func (p *printer) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p.emit(finalEvent(m.ChatMessage))
	return nil
}

// Typing implements connector.Typer: the status and tool name, and a clear
// of what was shown.
func (p *printer) Typing(_ context.Context, _ connector.Conversation, a imv2.ChatActivity) error {
	p.mu.Lock()
	was := p.typing
	p.typing = a.Status != imv2.ActivityIdle
	p.mu.Unlock()
	if p.typing {
		p.emit(Event{Event: "typing", Status: string(a.Status), ToolName: a.ToolName})
	} else if was {
		p.emit(Event{Event: "typing_clear"})
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
	p.emit(finalEvent(&imv2.ChatMessage{MessageID: id, Text: args.Text}))
	return json.RawMessage(fmt.Sprintf(`{"status":"sent","message_id":%q}`, id)), nil
}

func (p *printer) delivered(_ string, m imv2.ChatMessage, _ imv2.AckStatus) {
	text := m.Text
	if text == "" && len(m.Files) > 0 {
		text = "/file " + m.Files[0].Filename
	}
	p.emit(Event{Event: "sent", MessageID: m.MessageID, Text: strp(text)})
}

func (p *printer) failed(_ string, m imv2.ChatMessage, err *imv2.Error) {
	p.emit(Event{Event: "failed", MessageID: m.MessageID, Code: string(err.Code)})
}

// streamPlatform adds the native draft API (mode stream), and Discard so
// that the printer forgets a draft the display dropped.
type streamPlatform struct{ *printer }

func (s streamPlatform) Draft(_ context.Context, _ connector.Conversation, d connector.Draft) (string, error) {
	h := d.Handle
	if h == "" {
		h = s.nextHandle(d.MessageID)
	}
	s.draft(h, d)
	return h, nil
}

func (s streamPlatform) Finish(_ context.Context, _ connector.Conversation, handle string, m *connector.Message) error {
	s.finish(handle, m.ChatMessage)
	return nil
}

func (s streamPlatform) Discard(_ context.Context, _ connector.Conversation, handle string) error {
	s.discard(handle)
	return nil
}

// editPlatform adds post-then-edit (mode edit).
type editPlatform struct{ *printer }

func (e editPlatform) PostDraft(_ context.Context, _ connector.Conversation, messageID, text string) (string, error) {
	e.emit(Event{Event: "post", MessageID: messageID, Text: strp(text)})
	return e.nextHandle(messageID), nil
}

func (e editPlatform) Edit(_ context.Context, _ connector.Conversation, handle, text string) error {
	e.emit(Event{Event: "edit", MessageID: messageOf(handle), Text: strp(text)})
	return nil
}

func (e editPlatform) Finish(_ context.Context, _ connector.Conversation, _ string, m *connector.Message) error {
	e.emit(finalEvent(m.ChatMessage))
	return nil
}
