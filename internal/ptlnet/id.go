package ptlnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Environment variables (documented in docs/ptlnet.md and at the top of ptlnet.go).
const (
	// EnvNID overrides this process's nid: a dotted IPv4 address or a decimal uint32.
	EnvNID = "PTL_NID"
	// EnvPortBase is the TCP port of pid 0 (port = base + pid); default DefaultPortBase.
	EnvPortBase = "PTL_PORT_BASE"
	// EnvListen overrides the IP address the TCP listener binds (default: the nid's
	// address; "0.0.0.0" listens on every interface).
	EnvListen = "PTL_LISTEN_ADDR"
	// EnvTCPInsecure = 1 allows TCP connections without a job secret (no authentication).
	EnvTCPInsecure = "PTL_TCP_INSECURE"
	// EnvAnyUID = 1 accepts same-host peers of any uid (default: only this process's uid).
	EnvAnyUID = "PTL_SHM_ANY_UID"
)

// DefaultPortBase is the TCP port of pid 0 unless PTL_PORT_BASE says otherwise.
const DefaultPortBase = 20000

// errBadConfig is wrapped by every configuration error of Open.
var errBadConfig = errors.New("ptlnet: bad configuration")

// primaryIPv4 returns the first IPv4 address of an interface that is up and
// not loopback (interfaces in index order), or 127.0.0.1 if there is none.
func primaryIPv4() netip.Addr {
	ifs, err := net.Interfaces()
	if err == nil {
		for _, ifc := range ifs {
			if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
				continue
			}
			addrs, err := ifc.Addrs()
			if err != nil {
				continue
			}
			for _, a := range addrs {
				if p, ok := a.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(p.IP); ok && ip.Unmap().Is4() {
						return ip.Unmap()
					}
				}
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// NIDOf returns the nid of an IPv4 address (the address as a big-endian uint32).
func NIDOf(ip netip.Addr) uint32 {
	b := ip.Unmap().As4()
	return binary.BigEndian.Uint32(b[:])
}

// NIDAddr returns the IPv4 address a nid names.
func NIDAddr(nid uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], nid)
	return netip.AddrFrom4(b)
}

// parseNID parses PTL_NID: a dotted IPv4 address or a decimal uint32.
func parseNID(s string) (uint32, error) {
	if ip, err := netip.ParseAddr(s); err == nil && ip.Unmap().Is4() {
		return NIDOf(ip), nil
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: %s=%q: not an IPv4 address or a decimal uint32", errBadConfig, EnvNID, s)
	}
	return uint32(v), nil
}

// envFlag reports whether an env var is set to 1/true/yes.
func envFlag(name string) bool {
	switch strings.ToLower(os.Getenv(name)) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// unixName is the abstract unix socket name of (nid, pid): any process in the
// same network namespace finds it from the physical ID alone. Abstract names
// are per network namespace and vanish with the last socket, so nothing is
// left behind by a crash.
func unixName(id PhysID) string {
	return "@gexgo-ptl-" + strconv.FormatUint(uint64(id.NID), 16) + "-" + strconv.FormatUint(uint64(id.PID), 10)
}
