//go:build !race

package gex_test

const raceEnabled = false
