//go:build !race

package acemq_test

const raceEnabled = false
