package consolebridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
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

// printer is the console "IM platform" (a connector.Platform with every
// capability: the mode picks which the kit uses): it shows every side
// effect as JSON lines (the contract external tests read) or as a chat.
type printer struct {
	mu   sync.Mutex
	out  io.Writer
	json bool
}

// pretty renders an event for a human: text, status, tool name, code.
var pretty = map[string]string{
	"draft": "agent … %[1]s", "post": "agent … %[1]s", "edit": "agent … %[1]s", "final": "agent › %[1]s",
	"typing": "        … agent is %[2]s %[3]s", "sent": "you   ✓ %[1]s", "failed": "you   ✗ not delivered (%[4]s)",
}

func (p *printer) emit(e Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		b, _ := json.Marshal(e)
		fmt.Fprintf(p.out, "%s\n", b)
		return
	}
	if f, ok := pretty[e.Event]; ok {
		fmt.Fprintf(p.out, f+"\n", deref(e.Text), e.Status, e.ToolName, e.Code)
	}
	for _, f := range e.Files {
		fmt.Fprintf(p.out, "        📎 %s (%s)\n", f.Filename, f.Type)
	}
}

func strp(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (p *printer) final(m *imv2.ChatMessage) error {
	e := Event{Event: "final", MessageID: m.MessageID, Text: strp(m.Text)}
	for _, f := range m.Files {
		e.Files = append(e.Files, EventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
	}
	p.emit(e)
	return nil
}

// Post implements connector.Platform: a final without a draft.
func (p *printer) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	return p.final(m.ChatMessage)
}

// Draft implements connector.Drafter (mode stream); the handle is the message_id.
func (p *printer) Draft(_ context.Context, _ connector.Conversation, d display.Draft) (string, error) {
	p.emit(Event{Event: "draft", MessageID: d.MessageID, Text: strp(d.Text)})
	return d.MessageID, nil
}

// PostDraft and Edit implement connector.Editor (mode edit).
func (p *printer) PostDraft(_ context.Context, _ connector.Conversation, messageID, text string) (string, error) {
	p.emit(Event{Event: "post", MessageID: messageID, Text: strp(text)})
	return messageID, nil
}

func (p *printer) Edit(_ context.Context, _ connector.Conversation, handle, text string) error {
	p.emit(Event{Event: "edit", MessageID: handle, Text: strp(text)})
	return nil
}

// Finish ends a draft (Drafter) or a temporary message (Finisher).
func (p *printer) Finish(_ context.Context, _ connector.Conversation, _ string, m *connector.Message) error {
	return p.final(m.ChatMessage)
}

// Typing implements connector.Typer: the status and tool name, or a clear
// (the kit clears only typing it showed).
func (p *printer) Typing(_ context.Context, _ connector.Conversation, a imv2.ChatActivity) error {
	if a.Status == imv2.ActivityIdle {
		p.emit(Event{Event: "typing_clear"})
	} else {
		p.emit(Event{Event: "typing", Status: string(a.Status), ToolName: a.ToolName})
	}
	return nil
}

// Invoke serves console_message_send (dataplane.ToolHandler).
func (p *printer) Invoke(_ context.Context, _ string, req imv2.ToolInvoke) (json.RawMessage, error) {
	var args struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(req.Arguments, &args); err != nil || args.Text == "" || req.ToolID != ToolSend {
		return nil, imv2.Errorf(imv2.CodeToolInvokeFailed, "tool %q needs text", req.ToolID)
	}
	id := imv2.NewMessageID()
	return json.RawMessage(fmt.Sprintf(`{"status":"sent","message_id":%q}`, id)), p.final(&imv2.ChatMessage{MessageID: id, Text: args.Text})
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
