package connector

import (
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/xagentkit/imv2/internal/readmetable"
)

// TestQuota_PeerFloorsProperty: under any sequence of uploads taken,
// grown and released by a few peers on the default caps, what peers hold
// beyond their floors is counted exactly and stays within the pool, and a
// peer that holds nothing can always take a file of its floor's size on a
// channel of its own: no set of peers takes the room another needs
// (issue 37).
func TestQuota_PeerFloorsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q := newQuota(DefaultMaxTotalBytes, DefaultMaxFiles, DefaultMaxFileBytes)
		type file struct {
			ch   string
			size int64
		}
		var files []file
		for i := range rapid.IntRange(1, 200).Draw(t, "ops") {
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0: // a new upload reservation
				peer := "conn_" + strconv.Itoa(rapid.IntRange(0, 3).Draw(t, "peer"))
				ch := peer + "/ch_" + strconv.Itoa(rapid.IntRange(0, 7).Draw(t, "channel"))
				n := rapid.Int64Range(0, DefaultMaxFileBytes).Draw(t, "bytes")
				if q.take(ch, peer, n, false) {
					files = append(files, file{ch, n})
				}
			case 1: // a file grows
				if len(files) > 0 {
					j := rapid.IntRange(0, len(files)-1).Draw(t, "file")
					n := rapid.Int64Range(0, DefaultMaxFileBytes-files[j].size).Draw(t, "grow")
					if q.room(files[j].ch, false, n) {
						q.add(files[j].ch, false, n, 0)
						files[j].size += n
					}
				}
			case 2: // a file goes
				if len(files) > 0 {
					j := rapid.IntRange(0, len(files)-1).Draw(t, "file")
					q.add(files[j].ch, false, -files[j].size, -1)
					files = append(files[:j], files[j+1:]...)
				}
			}
			var above int64
			var aboveFiles int
			for _, p := range q.peers {
				b, f := q.beyond(p.bytes, p.files)
				above += b
				aboveFiles += f
			}
			if above != q.aboveBytes || aboveFiles != q.aboveFiles {
				t.Fatalf("op %d: above counted %d/%d, is %d/%d", i, q.aboveBytes, q.aboveFiles, above, aboveFiles)
			}
			if q.aboveBytes > q.poolBytes() || q.aboveFiles > q.poolFiles() {
				t.Fatalf("op %d: %d bytes / %d files beyond floors, over the pool %d / %d", i, q.aboveBytes, q.aboveFiles, q.poolBytes(), q.poolFiles())
			}
			if !q.take("newcomer/ch", "newcomer", q.peerFloorBytes(), false) {
				t.Fatalf("op %d: a peer holding nothing cannot take its floor (%d bytes); uploads hold %d bytes, %d files", i, q.peerFloorBytes(), q.upBytes, q.upFiles)
			}
			q.add("newcomer/ch", false, -q.peerFloorBytes(), -1)
		}
		for _, f := range files {
			q.add(f.ch, false, -f.size, -1)
		}
		if len(q.peers) != 0 || len(q.chans) != 0 || q.aboveBytes != 0 {
			t.Fatalf("all released, yet %d peers, %d channels, %d above", len(q.peers), len(q.chans), q.aboveBytes)
		}
	})
}

// TestREADME_UploadRoomRow: the README's limits row on upload room per
// connector_id gives the default quota's floors and shares.
func TestREADME_UploadRoomRow(t *testing.T) {
	rows, err := readmetable.Rows("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const label = "upload room per connector_id (built-in file stores)"
	if readmetable.Elsewhere[label] != "connector" {
		t.Fatalf("%q is not listed as the connector package's", label)
	}
	q := newQuota(DefaultMaxTotalBytes, DefaultMaxFiles, DefaultMaxFileBytes)
	want := []string{
		readmetable.Size(q.peerFloorBytes()), readmetable.Count(q.peerFloorFiles()), readmetable.Count(uploadPeers),
		readmetable.Size(q.poolBytes()), readmetable.Count(q.poolFiles()),
		readmetable.Size(q.upMaxBytes()), readmetable.Count(q.upMaxFiles()),
		readmetable.Size(q.maxBytes), readmetable.Count(q.maxFiles),
	}
	if err := readmetable.Check(rows, label, want); err != nil {
		t.Fatal(err)
	}
}

func TestREADME_UploadSlotsRow(t *testing.T) {
	rows, err := readmetable.Rows("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const label = "upload bodies read at once per connector_id"
	if readmetable.Elsewhere[label] != "connector" {
		t.Fatalf("%q is not listed as the connector package's", label)
	}
	want := []string{readmetable.Count(uploadSlotFloor), readmetable.Count(uploadPeers), readmetable.Count(DefaultMaxConcurrentUploads)}
	if err := readmetable.Check(rows, label, want); err != nil {
		t.Fatal(err)
	}
}
