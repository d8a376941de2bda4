package consolebridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/display"
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

// printer is the console "IM platform": it shows every target side effect,
// as JSON lines (the contract external tests read) or as a pleasant chat.
type printer struct {
	mu      sync.Mutex
	out     io.Writer
	json    bool
	live    string // message_id whose draft is on the current line
	shown   string // text of that draft printed so far
	typing  bool
	handles int
}

func (p *printer) emit(e Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		b, _ := json.Marshal(e)
		fmt.Fprintf(p.out, "%s\n", b)
		return
	}
	p.pretty(e)
}

// pretty renders an event for a human: streamed text grows on one line
// (only new text is written, so it reads well in a terminal and a log).
func (p *printer) pretty(e Event) {
	text := ""
	if e.Text != nil {
		text = *e.Text
	}
	endLive := func() {
		if p.live != "" {
			fmt.Fprintln(p.out)
			p.live, p.shown = "", ""
		}
	}
	switch e.Event {
	case "draft", "post", "edit":
		if p.live != e.MessageID {
			endLive()
			fmt.Fprint(p.out, "agent › ")
			p.live = e.MessageID
		}
		if rest, ok := strings.CutPrefix(text, p.shown); ok {
			fmt.Fprint(p.out, rest)
		} else {
			fmt.Fprint(p.out, "\n        "+text)
		}
		p.shown = text
	case "final":
		if rest, ok := strings.CutPrefix(text, p.shown); ok && p.live == e.MessageID {
			fmt.Fprintln(p.out, rest) // the final completes the streamed line (M11)
			p.live, p.shown = "", ""
		} else {
			endLive()
			fmt.Fprintf(p.out, "agent › %s\n", text)
		}
		for _, f := range e.Files {
			fmt.Fprintf(p.out, "        📎 %s (%s)\n", f.Filename, f.Type)
		}
	case "typing":
		endLive()
		what := "thinking"
		if e.Status == string(imv2.ActivityTool) {
			what = "using " + e.ToolName
		}
		fmt.Fprintf(p.out, "        … agent is %s\n", what)
	case "typing_clear":
	case "sent":
		endLive()
		fmt.Fprintf(p.out, "you   ✓ %s\n", text)
	case "failed":
		endLive()
		fmt.Fprintf(p.out, "you   ✗ not delivered (%s)\n", e.Code)
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

// Send implements display.Platform (buffer mode, and any final without a draft).
func (p *printer) Send(_ context.Context, _ string, m *imv2.ChatMessage) error {
	p.emit(finalEvent(m))
	return nil
}

// streamPlatform adds the native draft API (mode stream).
type streamPlatform struct{ *printer }

func (s streamPlatform) Draft(_ context.Context, _ string, d display.Draft) (string, error) {
	s.emit(Event{Event: "draft", MessageID: d.MessageID, Text: strp(d.Text)})
	if d.Handle != "" {
		return d.Handle, nil
	}
	return s.nextHandle(d.MessageID), nil
}

func (s streamPlatform) Finish(_ context.Context, _, _ string, m *imv2.ChatMessage) error {
	s.emit(finalEvent(m))
	return nil
}

// editPlatform adds post-then-edit (mode edit).
type editPlatform struct{ *printer }

func (e editPlatform) Post(_ context.Context, _, messageID, text string) (string, error) {
	e.emit(Event{Event: "post", MessageID: messageID, Text: strp(text)})
	return e.nextHandle(messageID), nil
}

func (e editPlatform) Edit(_ context.Context, _, handle, text string) error {
	e.emit(Event{Event: "edit", MessageID: messageOf(handle), Text: strp(text)})
	return nil
}

func (e editPlatform) Finish(_ context.Context, _, _ string, m *imv2.ChatMessage) error {
	e.emit(finalEvent(m))
	return nil
}
