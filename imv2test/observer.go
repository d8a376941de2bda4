package imv2test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/xagentkit/imv2"
)

// Event is one side effect on a Connector's target (the IM platform), in
// the shape of the console example's -json contract (examples/console):
//
//	draft         the text so far of a streamed message (native stream)
//	post, edit    a temporary message and its edits (post-then-edit)
//	final         a completed assistant message: once per message, ever
//	typing        activity shown (Status thinking or tool, ToolName)
//	typing_clear  activity cleared
//	sent          a user message xAgent acknowledged
//	failed        a user message ended by a non-retryable rejection
//	user          (xAgent side) a user message reached the agent
//
// RunKit and RecordingTarget make these events themselves. For `imv2sim
// conform -exec` a Connector writes them one JSON object a line on stdout
// (`imv2sim conform -h` states that contract); one built with
// connector.New does so with Options.Advanced.Events = os.Stdout.
type Event struct {
	// Event is the kind, one of the above.
	Event string `json:"event"`
	// MessageID is the message_id of the message shown (draft, post,
	// edit, final) or sent (sent, failed, user); empty for typing.
	MessageID string `json:"message_id,omitempty"`
	// Text is the whole text shown so far (draft, post, edit) or the
	// message's text (final, sent, user). It is a pointer so that a final
	// of files only, "text":"", differs from an event without text
	// (typing), where it is nil.
	Text *string `json:"text,omitempty"`
	// Files are a final's files, as xAgent sent them.
	Files []EventFile `json:"files,omitempty"`
	// Status is the activity shown by typing: thinking or tool.
	Status string `json:"status,omitempty"`
	// ToolName is the tool of a typing event with Status tool.
	ToolName string `json:"tool_name,omitempty"`
	// Code is the error code of a failed user message.
	Code string `json:"code,omitempty"`
}

// EventFile is one file of a final event: the fields of the final's
// imv2.File that name it.
type EventFile struct {
	// FileRef is the file_ref xAgent's final carried (M7).
	FileRef string `json:"file_ref"`
	// Type is the file's type: image, video, audio or file.
	Type string `json:"type"`
	// Filename is the name shown, when the final gave one.
	Filename string `json:"filename,omitempty"`
}

// Observer shows the suite what a Connector did on its target side, for
// checks that the wire alone cannot decide: exactly-once display, no
// temporary text on a target that cannot stream, typing. Two
// implementations come with the package: RecordingTarget (in process, for
// Connectors built on this SDK) and StreamObserver (a JSON-lines stream
// such as the console example's -json stdout).
type Observer interface {
	// Events returns every event so far, oldest first, and a channel that
	// is closed when the next one arrives (or the observer breaks).
	Events() (events []Event, changed <-chan struct{})
	// Err reports a broken observer: an invalid line, a stream that ended.
	Err() error
}

// Recorder is an Observer fed by Record: the building block of
// RecordingTarget, StreamObserver and RunKit's observer, and of an
// Observer of your own (a Connector whose side effects your test sees
// some other way). The zero value is ready; it is safe for concurrent
// use.
type Recorder struct {
	mu     sync.Mutex
	events []Event
	wake   chan struct{}
	err    error
}

// MaxEvents bounds the events a Recorder keeps; one more breaks it (Err),
// since an observer that floods cannot be judged either.
const MaxEvents = 100_000

// Record appends e.
func (r *Recorder) Record(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) >= MaxEvents {
		if r.err == nil {
			r.err = fmt.Errorf("observer: more than %d events", MaxEvents)
		}
		r.wakeLocked()
		return
	}
	r.events = append(r.events, e)
	r.wakeLocked()
}

// Fail marks the recorder broken; Err returns err from now on.
func (r *Recorder) Fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
	r.wakeLocked()
}

func (r *Recorder) wakeLocked() {
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

// Events implements Observer.
func (r *Recorder) Events() ([]Event, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wake == nil {
		r.wake = make(chan struct{})
	}
	return append([]Event(nil), r.events...), r.wake
}

// Err implements Observer.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// StreamObserver is an Observer reading one JSON Event per line, such as
// the stdout of `go run ./examples/console -json`. A line that is not an
// event breaks it (Err), since a Connector that prints garbage on its
// observer stream cannot be judged.
type StreamObserver struct {
	Recorder
	done chan struct{}
}

// maxEventLine bounds one line of an observer stream.
const maxEventLine = 8 << 20

// NewStreamObserver starts reading r on a goroutine that ends when r
// does (close r to stop it; Done reports it).
func NewStreamObserver(r io.Reader) *StreamObserver {
	s := &StreamObserver{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxEventLine)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			var e Event
			if err := json.Unmarshal(line, &e); err != nil || e.Event == "" {
				s.Fail(fmt.Errorf("observer stream: not an event: %q", clip(string(line), 80)))
				continue
			}
			s.Record(e)
		}
		if err := sc.Err(); err != nil {
			s.Fail(fmt.Errorf("observer stream: %w", err))
			return
		}
		s.Fail(errors.New("observer stream ended"))
	}()
	return s
}

// Done is closed when the stream has ended and nothing more is read.
func (s *StreamObserver) Done() <-chan struct{} { return s.done }

// RecordingTarget is the in-process Observer: an IM "platform" that
// records what a Connector built on this SDK does with its target. Hand
// Target() to the Connector (for example as dataplane.ServerConfig's
// NewTarget) and the suite sees every final, draft and typing change.
type RecordingTarget struct {
	Recorder
	// Files, when set, opens the bytes behind a final's file_ref, as a real
	// platform must before it can post the file (M7, M12); an error rejects
	// the final for good. Wire it to the Connector's file store, e.g.
	// connector.Handler.OpenFile. Set it before the Connector serves.
	Files func(ctx context.Context, channelID, fileRef string) (io.ReadCloser, error)

	streaming bool
	mu        sync.Mutex
	typing    map[string]bool // by channel
}

// NewRecordingTarget returns a recording target; streaming says whether
// Target() shows temporary text (drafts, as the kit's stream mode does) or
// not (a target that cannot stream, where K5 applies).
func NewRecordingTarget(streaming bool) *RecordingTarget {
	return &RecordingTarget{streaming: streaming, typing: map[string]bool{}}
}

// Streaming reports what NewRecordingTarget was told.
func (r *RecordingTarget) Streaming() bool { return r.streaming }

// Target returns the imv2.Target to give the Connector: it records
// activity always, and drafts only when streaming (the Channel finds both
// by their methods, SetActivity and UpdateDraft, as it does on the kit's).
func (r *RecordingTarget) Target() imv2.Target {
	if r.streaming {
		return streamingRecorder{r}
	}
	return plainRecorder{r}
}

type plainRecorder struct{ r *RecordingTarget }

func (p plainRecorder) PostMessage(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	return p.r.post(ctx, channelID, m)
}

func (p plainRecorder) SetActivity(ctx context.Context, channelID string, a imv2.ChatActivity) error {
	return p.r.activity(channelID, a)
}

type streamingRecorder struct{ r *RecordingTarget }

func (s streamingRecorder) PostMessage(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	return s.r.post(ctx, channelID, m)
}

func (s streamingRecorder) SetActivity(ctx context.Context, channelID string, a imv2.ChatActivity) error {
	return s.r.activity(channelID, a)
}

func (s streamingRecorder) UpdateDraft(_ context.Context, _, messageID, text string) error {
	s.r.Record(Event{Event: "draft", MessageID: messageID, Text: &text})
	return nil
}

func (r *RecordingTarget) post(ctx context.Context, channelID string, m *imv2.ChatMessage) error {
	e := Event{Event: "final", MessageID: m.MessageID, Text: &m.Text}
	for _, f := range m.Files {
		if r.Files != nil {
			rc, err := r.Files(ctx, channelID, f.FileRef)
			if err != nil {
				return imv2.Refused(fmt.Errorf("file_ref %q cannot be opened: %w", f.FileRef, err))
			}
			_, err = io.Copy(io.Discard, rc)
			rc.Close()
			if err != nil {
				return imv2.NotPosted(err)
			}
		}
		e.Files = append(e.Files, EventFile{FileRef: f.FileRef, Type: string(f.Type), Filename: f.Filename})
	}
	r.Record(e)
	return nil
}

func (r *RecordingTarget) activity(channelID string, a imv2.ChatActivity) error {
	r.mu.Lock()
	was := r.typing[channelID]
	if a.Status == imv2.ActivityIdle {
		delete(r.typing, channelID)
	} else {
		r.typing[channelID] = true
	}
	r.mu.Unlock()
	switch {
	case a.Status != imv2.ActivityIdle:
		r.Record(Event{Event: "typing", Status: string(a.Status), ToolName: a.ToolName})
	case was:
		r.Record(Event{Event: "typing_clear"})
	}
	return nil
}

// User makes a Connector send a user message, the way a person typing on
// the IM platform would; checks of inbound files and of pending delivery
// need one. channelID is the channel the script opened; a Connector that
// routes typed input by itself (the console sends to its newest channel)
// may ignore it.
type User interface {
	Say(ctx context.Context, channelID, text string) error
	SendFile(ctx context.Context, channelID, filename string, data []byte) error
}
