//go:build race

package acemq_test

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts are not the promise under -race.
const raceEnabled = true
