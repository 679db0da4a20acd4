package gex

import (
	"os"
	"strconv"
)

// GEXGO_TEST_CPUS sets the CPU count of the polite rule in a test's rank
// processes (a 4-rank job on a bigger machine made polite).
func init() {
	if v, err := strconv.Atoi(os.Getenv("GEXGO_TEST_CPUS")); err == nil {
		testCPUs = v
	}
}

// Polite reports whether c's waits are polite (more ranks on the host than
// CPUs).
func Polite(c *Client) bool { return c.polite }

// CPUWord is rank p's CPU word as c reads it (the CPU p last ran on, plus
// 1), or -1 if c keeps none for p.
func CPUWord(c *Client, p int) int {
	if c.mates.words == nil || c.mates.words[p] == nil {
		return -1
	}
	return int(c.mates.words[p].Load())
}
