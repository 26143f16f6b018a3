package workers

import "time"

// WithWatchLifetime returns d with the watches' lifetime set to lifetime,
// so a test sees a watch re-arm without waiting push.Lifetime.
func WithWatchLifetime(d *Dependencies, lifetime time.Duration) { d.lifetime = lifetime }

// WithDeferral returns d with the snoozes of units that meet a concurrency
// bound drawn from deferrals, so a test's units come back in moments.
func WithDeferral(d *Dependencies, deferrals func() time.Duration) { d.deferrals = deferrals }

// WithIndexBatch returns d with the vector index's steps moving batch
// passages each, so a test's build takes several steps.
func WithIndexBatch(d *Dependencies, batch int) { d.indexBatch = batch }
