package xmppbridge

// archive.go reads a conversation's messages back from the server's
// archive (XEP-0313 Message Archive Management): the catch-up of a
// reader that could not hold all the stream brought.

import (
	"context"
	"errors"
	"time"

	"mellium.im/xmpp"
	mam "mellium.im/xmpp/history"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"
)

// archivePage is the messages one catch-up query asks for: Prosody's
// default max_archive_query_results is 50.
const archivePage = 50

// mamResult is an XEP-0313 result: an archived message, with the ID the
// archive gave it (the message's stanza-id by the archive).
type mamResult struct {
	QueryID   string `xml:"queryid,attr"`
	ID        string `xml:"id,attr"`
	Forwarded struct {
		Message message `xml:"message"`
	} `xml:"urn:xmpp:forward:0 forwarded"`
}

// archiveQuery collects the results of one query, which arrive as
// messages of the stream before the query's answer.
type archiveQuery struct {
	from string // who must send them: the room, or "" and the bot's bare JID
	key  string
	page []incoming
}

// errArchiveRefused matches an archive's refusal of a query (the server
// keeps none, or not of this conversation, or not back to the cursor).
var errArchiveRefused = errors.New("xmpp: the server's archive refused the query")

// fetchArchive reads up to archivePage messages of the conversation key
// after the archive ID after (or, with none, since the time since), in
// the archive's order; complete says the archive has none after them.
func (br *Bridge) fetchArchive(ctx context.Context, s *xmpp.Session, key, after string, since time.Time) (page []incoming, complete bool, err error) {
	peerJID, typ := peer(key)
	q := mam.Query{ID: newID(), Limit: archivePage, PageID: after}
	if after == "" {
		q.Start = since
	}
	aq := &archiveQuery{key: key}
	var to jid.JID
	if typ == "groupchat" {
		to, err = jid.Parse(peerJID)
		aq.from = peerJID
	} else {
		q.With, err = jid.Parse(peerJID)
	}
	if err != nil {
		return nil, false, err
	}
	br.mu.Lock()
	br.queries[q.ID] = aq
	br.mu.Unlock()
	defer func() {
		br.mu.Lock()
		delete(br.queries, q.ID)
		br.mu.Unlock()
	}()
	res, err := mam.FetchIQ(ctx, q, stanza.IQ{To: to}, s)
	if se := (stanza.Error{}); errors.As(err, &se) {
		return nil, false, errors.Join(errArchiveRefused, err)
	} else if err != nil {
		return nil, false, err
	}
	br.mu.Lock()
	defer br.mu.Unlock()
	return aq.page, res.Complete, nil
}

// archived takes a result of a running query: from the archive queried
// only (a result from anyone else is dropped), at most archivePage.
func (br *Bridge) archived(from string, r *mamResult) {
	br.mu.Lock()
	aq := br.queries[r.QueryID]
	br.mu.Unlock()
	if aq == nil || r.ID == "" {
		return
	}
	if aq.from == "" {
		if from != "" && from != br.me.Bare().String() {
			return
		}
	} else if from != aq.from {
		return
	}
	in, key, ok := br.incomingOf(r.Forwarded.Message)
	in.id, in.arch = "sid:"+r.ID, r.ID
	in.skip = !ok || key != aq.key
	br.mu.Lock()
	defer br.mu.Unlock()
	if len(aq.page) < archivePage {
		aq.page = append(aq.page, in)
	}
}
