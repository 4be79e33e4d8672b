//go:build race

package cmdtest

const raceEnabled = true
