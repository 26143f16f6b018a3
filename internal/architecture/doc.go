// Package architecture holds no code: its tests keep the rules
// ARCHITECTURE.md states — which package may import which, and that SQL
// lives in the stores only — so a change that breaks one fails the build's
// tests rather than waiting for a review to notice.
package architecture
