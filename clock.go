package imv2

import "github.com/xagentkit/imv2/clock"

// Clock is the time source of every timer in the SDK: ack timeouts, backoff,
// TTL sweeps and activity timeouts. Tests inject fakeclock.New(…) and never
// sleep.
type Clock = clock.Clock

// Timer is the handle Clock.AfterFunc returns.
type Timer = clock.Timer

// SystemClock is the Clock of package time.
type SystemClock = clock.System
