// Package netns builds a small private network of pretend hosts on this
// machine for multi-host tests: k network namespaces ("hosts"), each with a
// loopback and one interface 10.<net>.0.<i+1>/24, joined by veth pairs to a
// bridge that lives in one more namespace (the "switch"). Nothing is attached
// to the machine's own namespaces, so test traffic stays on these private
// links and loopback. It needs root and iproute2's ip command.
package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Net is a set of namespaces made by Setup.
type Net struct {
	prefix string
	Hosts  []Host
	sw     string
}

// Host is one pretend host: its namespace and address.
type Host struct {
	NS   string // namespace name, for "ip netns exec NS"
	Addr string // its IP address on the private network
}

// ErrUnavailable is wrapped when namespaces cannot be created here (not
// root, no ip command, or the kernel refuses): tests skip with its message.
var ErrUnavailable = errors.New("netns: network namespaces are not available")

// Setup creates k hosts. The names embed the process id, so concurrent test
// binaries do not collide. Close removes everything.
func Setup(k int) (*Net, error) {
	if k < 1 || k > 200 {
		return nil, fmt.Errorf("netns: %d hosts: want 1..200", k)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: not running as root", ErrUnavailable)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: no ip command (Debian package iproute2)", ErrUnavailable)
	}
	pid := os.Getpid()
	n := &Net{prefix: "gx" + strconv.Itoa(pid), sw: "gx" + strconv.Itoa(pid) + "sw"}
	subnet := 16 + pid%200 // 10.<subnet>.0.0/24; private, never routed off the machine
	if err := ip("netns", "add", n.sw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	steps := [][]string{
		{"-n", n.sw, "link", "set", "lo", "up"},
		{"-n", n.sw, "link", "add", "br0", "type", "bridge"},
		{"-n", n.sw, "link", "set", "br0", "up"},
	}
	for i := 0; i < k; i++ {
		h := Host{NS: n.prefix + "h" + strconv.Itoa(i), Addr: fmt.Sprintf("10.%d.0.%d", subnet, i+1)}
		n.Hosts = append(n.Hosts, h)
		a, b := "h"+strconv.Itoa(i), "p"+strconv.Itoa(i) // host end, switch end (names are per namespace)
		steps = append(steps,
			[]string{"netns", "add", h.NS},
			[]string{"-n", h.NS, "link", "set", "lo", "up"},
			[]string{"-n", h.NS, "link", "add", a, "type", "veth", "peer", "name", b, "netns", n.sw},
			[]string{"-n", h.NS, "addr", "add", h.Addr + "/24", "dev", a},
			[]string{"-n", h.NS, "link", "set", a, "up"},
			[]string{"-n", n.sw, "link", "set", b, "master", "br0"},
			[]string{"-n", n.sw, "link", "set", b, "up"},
		)
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			n.Close()
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
	}
	// Running a program inside needs more than creating the namespace
	// (ip netns exec remounts /sys): check it once.
	if out, err := exec.Command("ip", "netns", "exec", n.Hosts[0].NS, "true").CombinedOutput(); err != nil {
		n.Close()
		return nil, fmt.Errorf("%w: ip netns exec: %v: %s", ErrUnavailable, err, strings.TrimSpace(string(out)))
	}
	return n, nil
}

// Close deletes the namespaces (and with them their links).
func (n *Net) Close() error {
	var errs []error
	for _, h := range n.Hosts {
		if err := ip("netns", "del", h.NS); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ip("netns", "del", n.sw); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Exec is the command prefix that runs a program on host i.
func (n *Net) Exec(i int) []string { return []string{"ip", "netns", "exec", n.Hosts[i].NS} }

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
