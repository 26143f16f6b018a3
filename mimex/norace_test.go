//go:build !race

package mimex

// raceEnabled is whether the tests run under the race detector.
const raceEnabled = false
