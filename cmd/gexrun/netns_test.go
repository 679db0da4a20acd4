package main

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/gexgo/gexgo/internal/netns"
)

// TestNetnsFlag: --netns K runs the ranks in blocks on K namespace hosts,
// each with its own host identity and address on the private network; bad
// values are usage errors.
func TestNetnsFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "2", "--netns", "3", "prog"}, "gexrun: --netns 3 is out of range [0, -n = 2]"},
		{[]string{"-n", "2", "--netns", "-1", "prog"}, "gexrun: --netns -1 is out of range [0, -n = 2]"},
		{[]string{"-n", "2", "--netns", "2", "--pretend-hosts", "2", "prog"}, "gexrun: --netns excludes --pretend-hosts and --hosts"},
	} {
		code, _, errOut := gexrun(c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "usage: gexrun -n N") {
			t.Errorf("gexrun %q: code %d, stderr %q; want 2 and %q with the synopsis", c.args, code, errOut, c.want)
		}
	}
	if _, out, _ := gexrun("--help"); !regexp.MustCompile(`(?m)^  --netns K\b`).MatchString(out) {
		t.Error("--help does not describe --netns")
	}
	n, err := netns.Setup(1) // can namespaces be made here at all?
	if errors.Is(err, netns.ErrUnavailable) {
		t.Skipf("the job part needs network namespaces: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	t.Setenv(roleEnv, "rank")
	code, out, errOut := gexrun("-n", "4", "--label", "--netns", "2", testExe(t), "0", "0", "0", "0")
	if code != 0 || errOut != "" {
		t.Fatalf("code %d, stderr %q", code, errOut)
	}
	for r := 0; r < 4; r++ {
		re := regexp.MustCompile(`(?m)^\[` + string(rune('0'+r)) + `\] rank ` + string(rune('0'+r)) + ` of 4 on gx\d+h` + string(rune('0'+r/2)) + `$`)
		if !re.MatchString(out) {
			t.Errorf("rank %d's line (on namespace host %d) is missing:\n%s", r, r/2, out)
		}
	}
}
