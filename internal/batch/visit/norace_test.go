//go:build !race

package visit_test

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
