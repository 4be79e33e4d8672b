//go:build race

package feedback

const raceEnabled = true
