package boot

import (
	"bufio"
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// pmiSeeds are the messages both fuzzers start from, encoded by the encoders.
var pmiSeeds = []struct {
	cmd   string
	attrs []pmiAttr
}{
	{"init", []pmiAttr{kv("pmi_version", "1"), kv("pmi_subversion", "1")}},
	{"maxes", []pmiAttr{kv("kvsname_max", "256"), kv("keylen_max", "64"), kv("vallen_max", "1024")}},
	{"put", []pmiAttr{kv("kvsname", "kvs_1_0"), kv("key", "gex-1-0"), kv("value", "1.AAEC_-")}},
	{"get_result", []pmiAttr{kv("rc", "0"), kv("msg", "success"), kv("value", "2.abc")}},
	{"barrier_in", nil},
	{"fullinit-response", []pmiAttr{kv("rank", "0"), kv("size", "4"), kv("spawner-jobid", "a;b"), {Key: "flag", NoValue: true}}},
	{"kvs-get-response", []pmiAttr{kv("found", "TRUE"), kv("value", "x;;y")}},
}

// FuzzPMI1Parse: parsePMI1 never panics, and a message it accepts whose
// values need no escaping encodes back to one that parses the same.
func FuzzPMI1Parse(f *testing.F) {
	for _, s := range pmiSeeds {
		f.Add(appendPMI1(nil, s.cmd, s.attrs...))
	}
	f.Add([]byte("cmd=get_result rc=0 value=a\\ b\n"))
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := parsePMI1(line)
		if err != nil {
			return
		}
		plain := func(v string) bool { return v != "" && !strings.ContainsAny(v, " \\\n") }
		if !plain(m.Cmd) {
			return
		}
		for _, a := range m.Attrs {
			if !a.NoValue && !plain(a.Value) {
				return
			}
		}
		enc := appendPMI1(nil, m.Cmd, m.Attrs...)
		m2, err := readPMI1(bufio.NewReader(bytes.NewReader(enc)))
		if err != nil {
			t.Fatalf("re-encoded %q does not parse: %v", enc, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip: %#v != %#v", m, m2)
		}
	})
}

// FuzzPMI2Parse: readPMI2 never panics on any byte stream, and what it
// accepts encodes back to a message that reads the same.
func FuzzPMI2Parse(f *testing.F) {
	for _, s := range pmiSeeds {
		f.Add(appendPMI2(nil, s.cmd, s.attrs...))
	}
	f.Add([]byte("abcdefcmd=x;"))
	f.Add([]byte("     4cmd="))
	f.Fuzz(func(t *testing.T, msg []byte) {
		m, err := readPMI2(bufio.NewReader(bytes.NewReader(msg)))
		if err != nil {
			return
		}
		enc := appendPMI2(nil, m.Cmd, m.Attrs...)
		m2, err := readPMI2(bufio.NewReader(bytes.NewReader(enc)))
		if err != nil {
			t.Fatalf("re-encoded %q does not parse: %v", enc, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip of %q: %#v != %#v", enc, m, m2)
		}
	})
}
