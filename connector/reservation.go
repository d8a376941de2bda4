package connector

import (
	"context"
	"io"
	"sync"
)

// Reserver is a FileStore that can set capacity aside before an upload's
// bytes are read. The Handler reserves an upload's declared size before it
// reads the body, so a full store answers 503 file_store_full before a
// single byte is buffered; MemoryStore and DiskStore implement it. For a
// FileStore without it the Handler streams into Put, which must then
// enforce its caps while reading.
type Reserver interface {
	FileStore
	// Reserve sets aside room for one file of channelID and at least
	// bytes bytes (a file slot and the bytes), or fails with ErrStoreFull
	// without reading anything. The file may still grow past bytes, up
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
// the file bytes a MemoryStore keeps: its request headers (NewServer caps
// them at 64 KiB), the multipart part headers and small fields (64 KiB),
// the store's copy buffer (64 KiB for a MemoryStore, 32 KiB for a
// DiskStore) and net/http's and multipart's buffers. It is the figure the
// package doc's memory budget and TestAttack_StalledUploadsHeapBounded use.
const UploadOverheadBytes = 256 << 10

// quota counts a store's files and bytes, stored or reserved, against its
// caps. It is guarded by its store's mutex.
type quota struct {
	maxBytes int64
	maxFiles int
	bytes    int64 // stored plus reserved
	files    int   // stored plus reserved
}

// take sets aside a file slot and n bytes, or reports false.
func (q *quota) take(n int64) bool {
	if q.files >= q.maxFiles || q.bytes+n > q.maxBytes {
		return false
	}
	q.files++
	q.bytes += n
	return true
}

// hold is the room of one file being written: a file slot and held bytes
// in a quota, grown as bytes arrive and handed over to the stored file or
// given back.
type hold struct {
	mu      *sync.Mutex // the store's
	q       *quota
	held    int64
	maxFile int64
	done    bool // the room went to a file or back to the quota
}

// grow makes the hold cover n bytes: ErrFileTooLarge past the per-file
// cap, ErrStoreFull when the store has no room left.
func (h *hold) grow(n int64) error {
	if n > h.maxFile {
		return ErrFileTooLarge
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n <= h.held {
		return nil
	}
	if h.q.bytes+n-h.held > h.q.maxBytes {
		return ErrStoreFull
	}
	h.q.bytes += n - h.held
	h.held = n
	return nil
}

// keepLocked hands size bytes and the slot over to a stored file and gives
// the rest back.
func (h *hold) keepLocked(size int64) {
	h.q.bytes -= h.held - size
	h.held, h.done = 0, true
}

// release gives everything back unless it went to a file.
func (h *hold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.q.bytes -= h.held
		h.q.files--
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
func putReserved(ctx context.Context, s Reserver, channelID, filename, mimeType string, r io.Reader) (FileInfo, error) {
	res, err := s.Reserve(ctx, channelID, 0)
	if err != nil {
		return FileInfo{}, err
	}
	defer res.Release()
	return res.Put(ctx, filename, mimeType, r)
}
