package connector_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/connector"
	"github.com/xagentkit/imv2/internal/testwait"
)

// plainEditor is an Editor, no Finisher, that reports every call.
type plainEditor chan string

func (p plainEditor) Post(_ context.Context, _ connector.Conversation, m *connector.Message) error {
	p <- "post " + m.Text + " " + strings.Repeat("+file", len(m.Attachments))
	return nil
}

func (p plainEditor) PostDraft(_ context.Context, _ connector.Conversation, messageID, text string) (string, error) {
	p <- "draft " + text
	return "ev-" + messageID, nil
}

func (p plainEditor) Edit(_ context.Context, _ connector.Conversation, handle, text string) error {
	p <- "edit " + handle + " " + text
	return nil
}

// discardingEditor is a plainEditor that removes drafts.
type discardingEditor struct{ plainEditor }

func (p discardingEditor) Discard(_ context.Context, _ connector.Conversation, handle string) error {
	p.plainEditor <- "discard " + handle
	return nil
}

// TestKit_M11_FilesOnlyFinalReplacesTheDraft: over loopback, a final of
// files and no text after a draft never leaves the drafted text shown:
// a Discarder's draft is removed once the files are posted; a plain
// Editor's is edited to the placeholder, never to "".
func TestKit_M11_FilesOnlyFinalReplacesTheDraft(t *testing.T) {
	for name, p := range map[string]connector.Platform{
		"editor":    make(plainEditor, 64),
		"discarder": discardingEditor{make(plainEditor, 64)},
	} {
		t.Run(name, func(t *testing.T) {
			calls, ok := p.(plainEditor)
			if !ok {
				calls = p.(discardingEditor).plainEditor
			}
			next := func() string { return testwait.Recv(t, (<-chan string)(calls), 20*time.Second) }
			k, url := startKit(t, p, "", connector.Options{Mode: connector.ModeEdit})
			a := newAgent()
			xc, ch := a.dial(t, url)
			ctx := context.Background()
			info, err := k.Handler().Files().Put(ctx, ch, "a.txt", "text/plain", strings.NewReader("hello"))
			require.NoError(t, err)

			r := newReply(t, xc, ch)
			require.NoError(t, r.Delta(ctx, "Let me find it"))
			require.Equal(t, "draft Let me find it", next())
			require.NoError(t, final(ctx, r, imv2.ChatMessage{Files: []imv2.File{{Type: imv2.FileFile, FileRef: info.FileRef, Filename: "a.txt"}}}))
			o := a.next(t)
			require.Nil(t, o.err)
			require.Equal(t, imv2.AckAccepted, o.status)
			h := "ev-" + r.MessageID()
			want := []string{"post  +file", "discard " + h}
			if name == "editor" {
				want = []string{"edit " + h + " 📎", "post  +file"}
			}
			require.Equal(t, want, []string{next(), next()})
			select {
			case extra := <-calls:
				t.Fatalf("a further platform call: %q", extra)
			default:
			}
		})
	}
}
