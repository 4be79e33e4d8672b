package client

import (
	"context"
	"time"
)

// SetSleep replaces how c waits between attempts, so that tests observe
// the waits without spending them.
func SetSleep(c *Client, sleep func(ctx context.Context, d time.Duration) error) { c.t.sleep = sleep }

// BackoffFor is the wait c would take before retry number attempt+1 after
// err.
func BackoffFor(c *Client, attempt int, err error) time.Duration { return c.t.backoff(attempt, err) }

// ParseRetryAfter exposes parseRetryAfter.
func ParseRetryAfter(v string, now time.Time) time.Duration { return parseRetryAfter(v, now) }

// SleepContext exposes the real wait between attempts.
func SleepContext(ctx context.Context, d time.Duration) error { return sleepContext(ctx, d) }

// SetNow replaces the clock of c's marks of failed nodes, so that tests
// pass Options.HomeRetry without waiting.
func SetNow(c *Client, now func() time.Time) { c.t.now = now }
