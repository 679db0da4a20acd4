//go:build race

package gex_test

// raceEnabled: the race detector slows every atomic and AM round trip by an
// order of magnitude; iteration counts of process-mode tests scale down so the
// jobs stay inside their time limit (the properties tested do not depend on
// the count).
const raceEnabled = true
