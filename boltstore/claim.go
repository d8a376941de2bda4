package boltstore

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/xagentkit/imv2"
)

// Claims (imv2.ClaimStore) live in their own bucket, added to a file of
// layout 1 at open: an older build ignores it and still reads the file.
//
//	claims  key(ch, id) → epoch ‖ until ‖ fingerprint (32) ‖ owner
//	meta    "open_epoch" → uint64, incremented by every Open
//
// epoch is the open_epoch of the Store that wrote the claim and until a
// timeKey. A claim from an earlier epoch was made by a process that has
// since closed the file or died: after a reopen every earlier claim is
// orphaned, whatever its lease said. Record, Release and DropChannel
// remove claims; an orphan that is never completed (its outcome was
// unknown) is removed by Sweep once its lease ended CompletedTTL ago, when
// no resend can come any more. Orphans number at most one per channel per
// crash, since a Channel delivers its messages one at a time.
//
// A claim whose post never began (imv2.ClaimStarter) also has an entry in
// bucket unposted, key(ch, id) → owner, written with the claim and
// removed by Begin, Record, Release and the sweep: a Claim that finds an
// orphan with that entry reports it Unposted, so its resend is posted. A
// claim without one (its post began, or a file of an older build, or a
// claim copied by Handover) is taken to have begun: the safe reading.
var (
	bucketUnposted = []byte("unposted")
	bucketClaims   = []byte("claims")
	keyOpenEpoch   = []byte("open_epoch")
	claimValueMin  = 8 + 8 + len(imv2.Fingerprint{})
)

var _ imv2.ClaimStarter = (*Store)(nil)

// openClaims makes the claims bucket if the file lacks it and starts a new
// epoch, in Open's transaction.
func openClaims(tx *bolt.Tx) (uint64, error) {
	if _, err := tx.CreateBucketIfNotExists(bucketClaims); err != nil {
		return 0, err
	}
	if _, err := tx.CreateBucketIfNotExists(bucketUnposted); err != nil {
		return 0, err
	}
	meta := tx.Bucket(bucketMeta)
	epoch := getU64(meta, keyOpenEpoch) + 1
	return epoch, meta.Put(keyOpenEpoch, u64(epoch))
}

// Claim implements imv2.ClaimStore. The claim is committed with fsync
// before Claim returns, so a crash after it leaves the claim behind (S8).
// A claim is held for another owner while it is from this open of the
// file and its lease lasts; any other claim is orphaned.
func (s *Store) Claim(ctx context.Context, channelID, messageID string, fp imv2.Fingerprint, owner string, lease time.Duration) (imv2.Claim, error) {
	key, err := recordKey(channelID, messageID)
	if err != nil {
		return imv2.Claim{}, err
	}
	var cl imv2.Claim
	err = s.update(ctx, func(tx *bolt.Tx) error {
		cl = imv2.Claim{}
		fp := fp // a group that fails runs fn again, with the caller's fp
		now := s.clock.Now()
		if v := tx.Bucket(bucketCompleted).Get(key); len(v) == completedValueLen && beUint64(v[:8]) > s.expiredCutoff() {
			cl.State = imv2.ClaimCompleted
			copy(cl.Fingerprint[:], v[16:])
			return errNoChange
		}
		claims, unposted := tx.Bucket(bucketClaims), tx.Bucket(bucketUnposted)
		cl.State = imv2.ClaimAcquired
		if v := claims.Get(key); len(v) >= claimValueMin {
			epoch, until, oldOwner := beUint64(v[:8]), beUint64(v[8:16]), string(v[claimValueMin:])
			if epoch == s.epoch && oldOwner != owner && until > timeKey(now) {
				cl = imv2.Claim{State: imv2.ClaimHeld, Owner: oldOwner, Until: fromTimeKey(until)}
				return errNoChange
			}
			cl.State, cl.Owner = imv2.ClaimOrphaned, oldOwner
			copy(cl.Fingerprint[:], v[16:claimValueMin])
			fp = cl.Fingerprint // a takeover changes owner and lease only
			if cl.Unposted = unposted.Get(key) != nil; cl.Unposted {
				if err := unposted.Put(key, []byte(owner)); err != nil {
					return err
				}
			}
		} else if err := unposted.Put(key, []byte(owner)); err != nil {
			return err
		}
		value := make([]byte, 0, claimValueMin+len(owner))
		value = append(value, u64(s.epoch)...)
		value = append(value, u64(timeKey(now.Add(lease)))...)
		value = append(append(value, fp[:]...), owner...)
		return claims.Put(key, value)
	})
	if err != nil {
		return imv2.Claim{}, err
	}
	return cl, nil
}

// Begin implements imv2.ClaimStarter: owner's claim's post begins. It is
// committed (in a group commit, with fsync) before Begin returns.
func (s *Store) Begin(ctx context.Context, channelID, messageID, owner string) error {
	key, err := recordKey(channelID, messageID)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		unposted := tx.Bucket(bucketUnposted)
		if string(unposted.Get(key)) != owner {
			return errNoChange
		}
		return unposted.Delete(key)
	})
}

// Release implements imv2.ClaimStore: it removes owner's claim, with fsync.
func (s *Store) Release(ctx context.Context, channelID, messageID, owner string) error {
	key, err := recordKey(channelID, messageID)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		claims := tx.Bucket(bucketClaims)
		v := claims.Get(key)
		if len(v) < claimValueMin || string(v[claimValueMin:]) != owner {
			return errNoChange
		}
		if err := tx.Bucket(bucketUnposted).Delete(key); err != nil {
			return err
		}
		return claims.Delete(key)
	})
}

// dropClaims removes every claim of a channel (DropChannel) and reports
// whether there was one.
func dropClaims(tx *bolt.Tx, channelID string) (bool, error) {
	claims, unposted := tx.Bucket(bucketClaims), tx.Bucket(bucketUnposted)
	keys, _ := keysWithPrefix(claims, channelPrefix(channelID))
	for _, k := range keys {
		if err := claims.Delete(k); err != nil {
			return false, err
		}
		if err := unposted.Delete(k); err != nil {
			return false, err
		}
	}
	return len(keys) > 0, nil
}

// handoverClaims copies the claims of channel from whose lease did not end
// before cutoff (they are not due for Sweep) to channel to, value and all,
// at most imv2.MaxHandoverRecords. The epoch is kept: a claim of an
// earlier open stays orphaned, one of this open stays held by its owner
// until its lease ends. A claim to already has stays. It reports whether
// it copied one.
func handoverClaims(tx *bolt.Tx, from, to string, cutoff uint64) (bool, error) {
	claims := tx.Bucket(bucketClaims)
	prefix := channelPrefix(from)
	keys, values := keysWithPrefix(claims, prefix)
	n := 0
	for i, k := range keys {
		v := values[i]
		if len(v) < claimValueMin || beUint64(v[8:16]) <= cutoff {
			continue
		}
		if n >= imv2.MaxHandoverRecords {
			break
		}
		key, err := recordKey(to, string(k[len(prefix):]))
		if err != nil {
			return false, err
		}
		if claims.Get(key) != nil {
			continue
		}
		if err := claims.Put(key, bytes.Clone(v)); err != nil {
			return false, err
		}
		n++
	}
	return n > 0, nil
}

// fromTimeKey inverts timeKey.
func fromTimeKey(k uint64) time.Time { return time.Unix(0, int64(k^(1<<63))) }

// sweepClaims removes the claims whose lease ended CompletedTTL ago or
// more, and returns how many.
func (s *Store) sweepClaims(ctx context.Context) (int, error) {
	n := 0
	err := s.update(ctx, func(tx *bolt.Tx) error {
		n = 0
		cutoff := s.expiredCutoff()
		claims := tx.Bucket(bucketClaims)
		var old [][]byte
		err := claims.ForEach(func(k, v []byte) error {
			if len(v) < claimValueMin || beUint64(v[8:16]) <= cutoff {
				old = append(old, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(old) == 0 {
			return errNoChange
		}
		for _, k := range old {
			if err := claims.Delete(k); err != nil {
				return err
			}
			if err := tx.Bucket(bucketUnposted).Delete(k); err != nil {
				return err
			}
		}
		n = len(old)
		return nil
	})
	return n, err
}
