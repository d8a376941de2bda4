package connector

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/kithook"
)

// eventLog writes what the platform showed (Advanced.Events): one JSON
// object a line per platform call that succeeded, in the observer
// contract of `imv2sim conform -exec` (package imv2test's Event).
type eventLog struct {
	mu  sync.Mutex
	enc *json.Encoder
	// handles maps a temporary message's handle, by channel, to its
	// message_id: an edit names only the handle. At most maxEventHandles,
	// then forgotten all at once (an edit of a forgotten one carries no
	// message_id).
	handles map[[2]string]string
}

// maxEventHandles bounds eventLog.handles.
const maxEventHandles = 4096

// event is one line of the stream; the members of imv2test.Event.
type event struct {
	Event     string      `json:"event"`
	MessageID string      `json:"message_id,omitempty"`
	Text      *string     `json:"text,omitempty"`
	Files     []eventFile `json:"files,omitempty"`
	Status    string      `json:"status,omitempty"`
	ToolName  string      `json:"tool_name,omitempty"`
}

type eventFile struct {
	FileRef  string `json:"file_ref"`
	Type     string `json:"type"`
	Filename string `json:"filename,omitempty"`
}

func newEventLog(w io.Writer) *eventLog {
	return &eventLog{enc: json.NewEncoder(w), handles: map[[2]string]string{}}
}

// saw writes c; a write error is dropped (the stream is for an observer,
// never on the delivery's path).
func (l *eventLog) saw(c kithook.Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := event{Event: c.Op, MessageID: c.MessageID, Text: &c.Text}
	key := [2]string{c.ChannelID, c.Handle}
	switch c.Op {
	case "post", "draft":
		if len(l.handles) >= maxEventHandles {
			clear(l.handles)
		}
		l.handles[key] = c.MessageID
	case "edit":
		e.MessageID = l.handles[key]
	case "final":
		for _, f := range c.Files {
			e.Files = append(e.Files, eventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
		}
	case "typing":
		e.Text, e.Status, e.ToolName = nil, string(c.Activity.Status), c.Activity.ToolName
		if c.Activity.Status == imv2.ActivityIdle {
			e = event{Event: "typing_clear"}
		}
	}
	_ = l.enc.Encode(e)
}
