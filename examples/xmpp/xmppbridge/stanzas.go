package xmppbridge

import "encoding/xml"

// Namespaces of the extensions the bridge speaks.
const (
	nsCorrect    = "urn:xmpp:message-correct:0"            // XEP-0308
	nsChatStates = "http://jabber.org/protocol/chatstates" // XEP-0085
	nsSID        = "urn:xmpp:sid:0"                        // XEP-0359
	nsOOB        = "jabber:x:oob"                          // XEP-0066, the URL of an XEP-0363 upload
	nsDelay      = "urn:xmpp:delay"                        // XEP-0203
	nsMUC        = "http://jabber.org/protocol/muc"        // XEP-0045
)

// message is the one message stanza shape the bridge sends and reads: a
// body, a correction, a chat state, stanza IDs and an out-of-band URL.
type message struct {
	XMLName   xml.Name    `xml:"jabber:client message"`
	ID        string      `xml:"id,attr,omitempty"`
	To        string      `xml:"to,attr,omitempty"`
	From      string      `xml:"from,attr,omitempty"`
	Type      string      `xml:"type,attr,omitempty"`
	Body      string      `xml:"body,omitempty"`
	Replace   *idAttr     `xml:"urn:xmpp:message-correct:0 replace"`
	Other     []chatState `xml:",any"` // a chat state to send; any other child read
	StanzaIDs []stanzaID  `xml:"urn:xmpp:sid:0 stanza-id"`
	OriginID  *idAttr     `xml:"urn:xmpp:sid:0 origin-id"`
	OOB       *oob        `xml:"jabber:x:oob x"`
	Delay     *delay      `xml:"urn:xmpp:delay delay"`
	Error     *stanzaFail `xml:"error"`
	Result    *mamResult  `xml:"urn:xmpp:mam:2 result"` // an archive query's result
}

type idAttr struct {
	ID string `xml:"id,attr"`
}

// stanzaID is an XEP-0359 <stanza-id/>: the ID the entity named by By
// (the bot's server for 1:1 chats, the room for group chats) gave the
// message when it archived it — the same on every redelivery.
type stanzaID struct {
	ID string `xml:"id,attr"`
	By string `xml:"by,attr"`
}

type oob struct {
	URL string `xml:"url"`
}

type delay struct {
	Stamp string `xml:"stamp,attr"`
}

type stanzaFail struct {
	Type string `xml:"type,attr"`
}

// chatState is an XEP-0085 element (active, composing, paused) to send;
// read, it is any child the bridge does not know, and ignored.
type chatState struct {
	XMLName xml.Name
}

func chatStateOf(name string) []chatState {
	return []chatState{{XMLName: xml.Name{Space: nsChatStates, Local: name}}}
}

// presence is the bot's presence: the initial one, and a MUC join.
type presence struct {
	XMLName xml.Name `xml:"jabber:client presence"`
	To      string   `xml:"to,attr,omitempty"`
	Type    string   `xml:"type,attr,omitempty"`
	MUC     *mucJoin `xml:"http://jabber.org/protocol/muc x"`
}

type mucJoin struct {
	History *history `xml:"history"`
}

// history asks a room for the messages since a time on join (XEP-0045,
// section 7.2.14, "Managing Discussion History").
type history struct {
	Since string `xml:"since,attr"`
}
