package imv2

import (
	"context"
	"time"
)

// ClaimStore is a CompletedStore that also records the intent to run a
// message's side effect before the Target runs, and its completion after
// (Record). A Channel whose Completed store implements it (found by type
// assertion, as http.Flusher is) claims every message before its
// PostMessage, so that
//   - a crash between the side effect and Record leaves an orphaned claim
//     behind instead of nothing, and the resend after the restart is not
//     posted blindly a second time (S8);
//   - in a store shared by replicas, one owner at a time runs a message's
//     side effect (A6 across processes).
//
// Owner names one running process (a random ID made at start); a lease
// bounds how long a claim of a live owner blocks others. Implementations
// must be safe for concurrent use, and durable stores must make a claim
// durable before Claim returns.
//
// Record completes a claim (it removes it, whoever holds it). A claim that
// owner itself still holds is reported ClaimOrphaned to owner: the Channel
// runs one attempt per message at a time, so a second Claim by the same
// owner means its earlier attempt ended without Record or Release (a
// failed Record after the post) and its outcome is unknown.
//
// Taking over an orphan (ClaimOrphaned) changes the claim's owner and
// lease only: its fingerprint stays that of the interrupted attempt, the
// content that may have been posted, whatever content the taker brought.
// So a copy with other content (a conflict the caller refuses) cannot make
// the real resend a conflict too.
//
// What remains after a crash between a successful post and Record: the
// message was shown, and the store holds an orphaned claim. The resend is
// posted again only when the platform deduplicates by the idempotency key
// (the kit's connector.IdempotentPlatform) or answered "not posted"
// (connector.PostChecker). A platform with neither capability gets
// nothing: the resend is rejected with CodeDeliveryOutcomeUnknown,
// retryable=false. So a message can be lost (its post happened or not,
// nobody can tell) and reported to the sender, but it is never shown
// twice. A crash between Claim and the post, where the message was not
// shown, is told apart only by a ClaimStarter (Claim.Unposted: the resend
// is posted); with any other ClaimStore it is answered the same way.
//
// A method may keep its ctx after it returned (a write-behind flush with
// context.WithoutCancel(ctx), a trace span): the Channel assumes nothing
// of what a store does with ctx, and a kept ctx stays that call's.
type ClaimStore interface {
	CompletedStore
	// Claim takes the message for owner until now+lease, unless it is
	// completed or held by another live owner, and reports what it found.
	// fp is the content being delivered; a completed record carries its own.
	Claim(ctx context.Context, channelID, messageID string, fp Fingerprint, owner string, lease time.Duration) (Claim, error)
	// Release drops owner's claim on the message without completing it:
	// the Target refused it and nothing was posted. Releasing a claim that
	// is not owner's, or none, is not an error and changes nothing.
	Release(ctx context.Context, channelID, messageID, owner string) error
}

// ClaimStarter is a ClaimStore that learns when the post of a claimed
// message begins. A Channel whose Completed store implements it (found by
// type assertion) calls Begin after the message's claim and its other
// checks, right before the Target's PostMessage, and posts only once
// Begin returned: a durable store writes it before returning (a
// group-committing one in a shared commit). So a process killed between
// Claim and Begin leaves a claim whose post never began, which Claim then
// reports orphaned with Unposted set, and the resend is posted: the final
// is not lost. Only a death after Begin — the post may have started —
// leaves the outcome unknown (S8). A takeover of an orphan keeps what the
// claim knew: a claim whose post began stays so until Record or Release.
type ClaimStarter interface {
	ClaimStore
	// Begin records that owner is about to post the message it claimed.
	// It changes nothing when owner does not hold the claim.
	Begin(ctx context.Context, channelID, messageID, owner string) error
}

// ClaimRenewer is a ClaimStore that can extend a claim its owner still
// holds. A Channel whose Completed store implements it (found by type
// assertion) renews each claim it holds every ClaimLease/3 while the
// message's WasPosted check, post and Record run, and retries a Record
// that failed after the post until the store timeout: a live delivery
// keeps its claim however long the store or the Target takes, and only a
// holder that stopped renewing (dead, or cut off from the store for most
// of a lease) loses it to another owner.
type ClaimRenewer interface {
	ClaimStore
	// RenewClaim moves the end of owner's claim on the message to lease
	// from now, and reports whether owner still held it (false: it was
	// completed, released or taken over, and nothing changed).
	RenewClaim(ctx context.Context, channelID, messageID, owner string, lease time.Duration) (bool, error)
}

// ClaimState is what Claim found.
type ClaimState uint8

const (
	// ClaimAcquired: no record and no live claim; the caller holds the
	// message now and may run its side effect.
	ClaimAcquired ClaimState = iota + 1
	// ClaimCompleted: the message completed earlier; Claim.Fingerprint is
	// the recorded content (equal: duplicate; other: conflict, S6).
	ClaimCompleted
	// ClaimHeld: another owner's claim is live; the caller must not run
	// the side effect now (answer retryable busy).
	ClaimHeld
	// ClaimOrphaned: an earlier claim was never completed and its owner is
	// gone (its lease ran out, or the store knows the owner's process
	// ended). The side effect may or may not have happened. The claim now
	// belongs to the caller, with its earlier fingerprint, and the caller
	// decides whether a re-post is safe.
	ClaimOrphaned
)

// Claim is the answer of ClaimStore.Claim.
type Claim struct {
	State ClaimState
	// Fingerprint is the completed record's content (ClaimCompleted) or
	// the orphaned claim's content (ClaimOrphaned).
	Fingerprint Fingerprint
	// Owner is the other owner (ClaimHeld) or the former one (ClaimOrphaned).
	Owner string
	// Until is when the other owner's lease ends (ClaimHeld).
	Until time.Time
	// Unposted (ClaimOrphaned, from a ClaimStarter): the orphan's post
	// never began, so posting it cannot show it twice.
	Unposted bool
}
