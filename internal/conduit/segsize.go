package conduit

import (
	"fmt"
	"strconv"
	"strings"
)

// EnvMaxSegSize is GASNet's GASNET_MAX_SEGSIZE: the largest segment a rank may
// attach. DefaultMaxSegSize applies when it is unset.
const (
	EnvMaxSegSize     = "GASNET_MAX_SEGSIZE"
	DefaultMaxSegSize = "0.5/H"
	pageSize          = 4096
)

// ParseSegSize interprets a GASNET_MAX_SEGSIZE value:
//
//	"67108864", "64M", "64MB", "64MiB", "1G", "2T"  absolute sizes (binary units; K M G T)
//	"0.5"                                           that fraction of physical memory (0 < f <= 1)
//	"0.5/H" or "64M/H"                              the amount divided among hostRanks processes
//
// The result is rounded down to the page size and is at least one page.
func ParseSegSize(s string, physMem uint64, hostRanks int) (uint64, error) {
	orig := s
	s = strings.TrimSpace(s)
	perHost := false
	if strings.HasSuffix(strings.ToUpper(s), "/H") {
		perHost = true
		s = s[:len(s)-2]
	}
	if s == "" {
		return 0, fmt.Errorf("%s=%q: empty size", EnvMaxSegSize, orig)
	}
	var v float64
	up := strings.ToUpper(s)
	unit := uint64(1)
	for _, u := range []struct {
		suf  string
		mult uint64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}} {
		if strings.HasSuffix(up, u.suf) {
			unit = u.mult
			up = up[:len(up)-len(u.suf)]
			break
		}
	}
	v, err := strconv.ParseFloat(up, 64)
	if err != nil || v != v || v <= 0 || v > 1<<62 {
		return 0, fmt.Errorf("%s=%q: not a positive size (examples: 64MB, 1G, 0.5, 0.5/H)", EnvMaxSegSize, orig)
	}
	var bytes float64
	switch {
	case unit == 1 && v <= 1 && strings.Contains(up, "."):
		bytes = v * float64(physMem)
	case unit == 1 && v <= 1 && v == 1 && !strings.Contains(up, "."):
		bytes = 1 // "1" is one byte, rounded up to a page below
	default:
		bytes = v * float64(unit)
	}
	if perHost {
		if hostRanks < 1 {
			hostRanks = 1
		}
		bytes /= float64(hostRanks)
	}
	if bytes > 1<<62 {
		bytes = 1 << 62
	}
	n := uint64(bytes) / pageSize * pageSize
	if n < pageSize {
		n = pageSize
	}
	return n, nil
}
