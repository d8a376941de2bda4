package pgstore

import (
	"context"
	"time"

	"github.com/xagentkit/imv2"
	"github.com/xagentkit/imv2/internal/connid"
)

// GroupCall is a Claim (Record and Begin false), a Record or a Begin for
// RunGroup, and its outcome.
type GroupCall struct {
	Ctx              context.Context
	Record, Begin    bool
	Channel, Message string
	FP               imv2.Fingerprint
	Owner            string
	Lease            time.Duration
	Claim            imv2.Claim
	Err              error
}

// RunGroup runs calls as one group, one transaction, as concurrent calls
// would be run, and returns the groups s committed so far.
func (s *Store) RunGroup(calls []*GroupCall) int64 {
	group := make([]*groupCall, len(calls))
	for i, c := range calls {
		group[i] = &groupCall{ctx: c.Ctx, record: c.Record, begin: c.Begin, ch: c.Channel, id: c.Message, fp: c.FP, owner: c.Owner, lease: c.Lease}
		group[i].key = messageKey(c.Channel, c.Message)
		if c.Ctx != nil {
			group[i].conn = connid.ConnectorID(c.Ctx)
		}
	}
	s.runGroup(group)
	for i, c := range calls {
		c.Claim, c.Err = group[i].claim, group[i].err
	}
	return s.group.commits.Load()
}

// Commits is the groups s committed so far.
func (s *Store) Commits() int64 { return s.group.commits.Load() }

// ClaimGroupSQL, RecordGroupSQL and BeginSQL are the group commit's
// statements, as a watch of the wire protocol recognises them
// (pgwatch_test.go).
var ClaimGroupSQL, RecordGroupSQL, BeginSQL = claimGroup, recordGroup, beginSQL
