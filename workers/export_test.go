package workers

import "time"

// WithWatchLifetime returns d with the watches' lifetime set to lifetime,
// so a test sees a watch re-arm without waiting push.Lifetime.
func WithWatchLifetime(d *Dependencies, lifetime time.Duration) { d.lifetime = lifetime }
