//go:build !race

package feedback

const raceEnabled = false
