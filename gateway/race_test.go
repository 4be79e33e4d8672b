//go:build race

package gateway_test

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
