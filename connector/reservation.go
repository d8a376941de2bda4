package connector

import (
	"context"
	"io"
	"sync"
)

// Reserver is a FileStore that can set capacity aside before an upload's
// bytes are read. The Handler reserves an upload's declared size before it
// reads the body, so a full store answers 503 file_store_full before a
// single byte is buffered; MemoryFileStore and DiskFileStore implement it. For a
// FileStore without it the Handler streams into Put, which must then
// enforce its caps while reading.
type Reserver interface {
	FileStore
	// Reserve sets aside room for one file of channelID and at least
	// bytes bytes (a file slot and the bytes), or fails with ErrStoreFull
	// without reading anything. It is for uploads: the built-in stores
	// give them a share of the caps per channel and keep a reserve for
	// Put (MemoryFileStoreOptions). The file may still grow past bytes, up
	// to the store's per-file cap, while the store has room.
	Reserve(ctx context.Context, channelID string, bytes int64) (Reservation, error)
}

// Reservation is room set aside in a store for one file.
type Reservation interface {
	// Put stores the bytes of r as FileStore.Put does, into the room
	// set aside; it may be called once.
	Put(ctx context.Context, filename, mime string, r io.Reader) (FileInfo, error)
	// Release gives back the room Put did not use: all of it when Put
	// was not called or failed. It may be called more than once; call it
	// always, after Put.
	Release()
}

// UploadOverheadBytes bounds the memory one upload in flight holds besides
// the file bytes a MemoryFileStore keeps: its request headers (NewServer caps
// them at 64 KiB), the multipart part headers and small fields (64 KiB),
// the store's copy buffer (64 KiB for a MemoryFileStore, 32 KiB for a
// DiskFileStore) and net/http's and multipart's buffers. It is the figure the
// package doc's memory budget and TestAttack_StalledUploadsHeapBounded use.
const UploadOverheadBytes = 256 << 10

// quota counts a store's files and bytes, stored or reserved, against its
// caps. It is guarded by its store's mutex.
//
// Uploads (Reserve: xAgent's files, T1) and the Connector's own user files
// (Put: OfferFile, M6) are told apart, so no peer holding the API key can
// crowd out the users: uploads may take the caps less a reserve of an
// eighth of the files and bytes, kept for Put, and one channel's uploads
// at most an eighth of the files and a quarter of the bytes (at least one
// file of the largest size), so one channel cannot take every other's
// room either.
//
// Uploads are shared per peer too (its connector_id, which the Handler
// puts on the context: HandlerConfig.ConnectorOf; a channel of none is a
// peer of its own), as imv2.NewPooledBudget shares memory: a quarter of the
// upload share is set aside as floors of uploadPeers peers, so each is
// guaranteed a floor (an uploadPeers·4th of the upload share: 896 KiB and
// 3 files with the defaults) whatever the others hold, and what peers hold
// beyond their floors takes at most the other three quarters. (A store
// so small that the floors would leave no room for one file of the
// largest size sets aside only what leaves that room; one with fewer
// than 293 file slots, where a floor would hold no file, none.) One
// connector_id's slow uploads over many channels (each reserving the
// largest file) can hold no more than that, and another connector_id's
// small uploads are still stored (issue 37).
type quota struct {
	maxBytes int64
	maxFiles int
	maxFile  int64 // per file
	bytes    int64 // stored plus reserved
	files    int   // stored plus reserved
	upBytes  int64 // of those, uploads'
	upFiles  int
	chans    map[string]*quotaUse // uploads per channel
	peers    map[string]*quotaUse // uploads per peer: "c" + connector_id, or "h" + channel ID when none is known
	// aboveBytes and aboveFiles are what peers hold beyond their floors.
	aboveBytes int64
	aboveFiles int
}

type quotaUse struct {
	bytes int64
	files int
	peer  string // a channel's peer
}

// uploadPeers is how many peers' floors a quota sets aside: the data
// plane's cap on connector_ids (dataplane.DefaultMaxConnectors), so every
// connector_id a Connector holds at once keeps its floor.
const uploadPeers = 64

func newQuota(maxBytes int64, maxFiles int, maxFile int64) quota {
	return quota{maxBytes: maxBytes, maxFiles: maxFiles, maxFile: maxFile, chans: map[string]*quotaUse{}, peers: map[string]*quotaUse{}}
}

// Upload shares of a quota (see quota).
func (q *quota) upMaxFiles() int     { return q.maxFiles - q.maxFiles/8 }
func (q *quota) upMaxBytes() int64   { return q.maxBytes - q.maxBytes/8 }
func (q *quota) chanMaxFiles() int   { return max(1, q.maxFiles/8) }
func (q *quota) chanMaxBytes() int64 { return min(q.upMaxBytes(), max(q.maxBytes/4, q.maxFile)) }

// Peer floors of a quota, and the pool beyond them (see quota).
func (q *quota) peerFloorFiles() int { return q.upMaxFiles() / (4 * uploadPeers) }
func (q *quota) peerFloorBytes() int64 {
	if q.peerFloorFiles() == 0 { // a floor without a file slot holds nothing
		return 0
	}
	return q.upMaxBytes() / (4 * uploadPeers)
}
func (q *quota) poolBytes() int64 {
	return q.upMaxBytes() - min(uploadPeers*q.peerFloorBytes(), max(0, q.upMaxBytes()-q.maxFile))
}
func (q *quota) poolFiles() int {
	return q.upMaxFiles() - min(uploadPeers*q.peerFloorFiles(), max(0, q.upMaxFiles()-1))
}

// beyond returns what a peer using bytes and files holds beyond its floor.
func (q *quota) beyond(bytes int64, files int) (int64, int) {
	return max(0, bytes-q.peerFloorBytes()), max(0, files-q.peerFloorFiles())
}

// peerRoom reports whether peer's uploads may grow by n bytes and files
// more: what all peers hold beyond their floors stays within the pool.
func (q *quota) peerRoom(peer string, n int64, files int) bool {
	var u quotaUse
	if p := q.peers[peer]; p != nil {
		u = *p
	}
	ob, of := q.beyond(u.bytes, u.files)
	nb, nf := q.beyond(u.bytes+n, u.files+files)
	return q.aboveBytes-ob+nb <= q.poolBytes() && q.aboveFiles-of+nf <= q.poolFiles()
}

// take sets aside a file slot and n bytes for a file of channel ch (an
// upload of peer unless own), or reports false.
func (q *quota) take(ch, peer string, n int64, own bool) bool {
	if q.files >= q.maxFiles || q.bytes+n > q.maxBytes {
		return false
	}
	if !own {
		u := q.chans[ch]
		switch {
		case u != nil:
			peer = u.peer // a channel keeps the peer it first uploaded under
		case peer == "":
			peer = "h" + ch // no connector_id known: the channel is its own peer
		default:
			peer = "c" + peer
		}
		if q.upFiles >= q.upMaxFiles() || q.upBytes+n > q.upMaxBytes() ||
			(u != nil && (u.files >= q.chanMaxFiles() || u.bytes+n > q.chanMaxBytes())) || n > q.chanMaxBytes() ||
			!q.peerRoom(peer, n, 1) {
			return false
		}
		if u == nil {
			q.chans[ch] = &quotaUse{peer: peer}
		}
	}
	q.add(ch, own, n, 1)
	return true
}

// room reports whether a file of channel ch can grow by n more bytes.
func (q *quota) room(ch string, own bool, n int64) bool {
	if q.bytes+n > q.maxBytes {
		return false
	}
	if own {
		return true
	}
	u := q.chans[ch]
	return q.upBytes+n <= q.upMaxBytes() && (u == nil || u.bytes+n <= q.chanMaxBytes() && q.peerRoom(u.peer, n, 0))
}

// add counts bytes and files (either may be negative) of channel ch; an
// upload's are counted in the upload shares, its channel's and its
// peer's, too.
func (q *quota) add(ch string, own bool, bytes int64, files int) {
	q.bytes += bytes
	q.files += files
	if own {
		return
	}
	q.upBytes += bytes
	q.upFiles += files
	u := q.chans[ch]
	if u == nil { // a file kept from before a restart (diskkeep): no peer known
		u = &quotaUse{peer: "h" + ch}
		q.chans[ch] = u
	}
	u.bytes += bytes
	u.files += files
	p := q.peers[u.peer]
	if p == nil {
		p = &quotaUse{}
		q.peers[u.peer] = p
	}
	ob, of := q.beyond(p.bytes, p.files)
	p.bytes += bytes
	p.files += files
	nb, nf := q.beyond(p.bytes, p.files)
	q.aboveBytes += nb - ob
	q.aboveFiles += nf - of
	if p.files <= 0 {
		delete(q.peers, u.peer)
	}
	if u.files <= 0 {
		delete(q.chans, ch)
	}
}

// hold is the room of one file being written: a file slot and held bytes
// in a quota, grown as bytes arrive and handed over to the stored file or
// given back.
type hold struct {
	mu      *sync.Mutex // the store's
	q       *quota
	ch      string
	own     bool // Put's, not an upload's
	held    int64
	maxFile int64
	done    bool // the room went to a file or back to the quota
}

// grow makes the hold cover n bytes: ErrFileTooLarge past the per-file
// cap, ErrStoreFull when the store (or the upload's share) has no room.
func (h *hold) grow(n int64) error {
	if n > h.maxFile {
		return ErrFileTooLarge
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n <= h.held {
		return nil
	}
	if !h.q.room(h.ch, h.own, n-h.held) {
		return ErrStoreFull
	}
	h.q.add(h.ch, h.own, n-h.held, 0)
	h.held = n
	return nil
}

// keepLocked hands size bytes and the slot over to a stored file and gives
// the rest back.
func (h *hold) keepLocked(size int64) {
	h.q.add(h.ch, h.own, size-h.held, 0)
	h.held, h.done = 0, true
}

// release gives everything back unless it went to a file.
func (h *hold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.q.add(h.ch, h.own, -h.held, -1)
		h.held, h.done = 0, true
	}
}

// fill copies r into put in pieces, growing h before each piece is kept,
// so a file takes room only as its bytes arrive and never past a cap. It
// returns the byte count and the first 512 bytes (for type detection).
func fill(ctx context.Context, h *hold, r io.Reader, buf []byte, put func([]byte) error) (int64, []byte, error) {
	var n int64
	var head []byte
	for {
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			if gerr := h.grow(n + int64(k)); gerr != nil {
				return n, head, gerr
			}
			if len(head) < 512 {
				head = append(head, buf[:min(k, 512-len(head))]...)
			}
			if perr := put(buf[:k]); perr != nil {
				return n, head, perr
			}
			n += int64(k)
		}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return n, head, ctx.Err()
		default:
			return n, head, err
		}
		if err := ctx.Err(); err != nil {
			return n, head, err
		}
	}
}

// putReserved is FileStore.Put for a store that reserves: a reservation of
// nothing, then Reservation.Put, so the caps are checked as bytes arrive.
// It is the Connector's own file (own: the reserve is open to it).
func putReserved(ctx context.Context, reserve func(ctx context.Context, channelID string, bytes int64, own bool) (Reservation, error), channelID, filename, mimeType string, r io.Reader) (FileInfo, error) {
	res, err := reserve(ctx, channelID, 0, true)
	if err != nil {
		return FileInfo{}, err
	}
	defer res.Release()
	return res.Put(ctx, filename, mimeType, r)
}
