package boot

// PMI wire formats, client side.
//
// PMI-1 ("simple" PMI, as implemented by MPICH's src/pmi/simple/simple_pmi.c
// and src/pmi/src/pmi_wire.c, message set in src/pmi/maint/pmi-1.1.txt): one
// command per line, "cmd=NAME key=value key=value\n". Keys are
// [A-Za-z0-9_/-]; a value runs to the next space or newline (MPICH >= 4.1
// also unescapes "\c" to "c"; we accept that and never send escapes: every
// value we send is [A-Za-z0-9_./-]).
//
// PMI-2 (the "PMI-2 wire protocol", MPICH src/pmi/pmi2/simple/simple2pmi.c and
// src/pmi/maint/pmi-2.0.txt): a 6-character decimal length, space padded,
// then that many bytes "cmd=NAME;key=value;key=value;". Per the PMI-2
// design notes a ';' inside a value is written ";;" (older MPICH and Slurm
// clients do this; MPICH >= 4.1 neither escapes nor unescapes). We unescape
// ";;" when parsing and never send a ';' in a value.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// pmiMaxLine bounds one PMI-1 line or PMI-2 message we accept from the server
// (MPICH's PMIU_MAXLINE is 1024; hydra answers get with up to vallen_max
// bytes of value). Longer input is a protocol error, not an allocation.
const pmiMaxLine = 64 << 10

// pmiAttr is one key=value of a PMI message. A key without '=' has Value ""
// and NoValue true.
type pmiAttr struct {
	Key, Value string
	NoValue    bool
}

// pmiMsg is one parsed PMI command or response.
type pmiMsg struct {
	Cmd   string
	Attrs []pmiAttr
}

// Get returns the value of the first attribute named key.
func (m *pmiMsg) Get(key string) (string, bool) {
	for _, a := range m.Attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// String renders m in PMI-1 form, for error messages.
func (m *pmiMsg) String() string {
	return strings.TrimSuffix(string(appendPMI1(nil, m.Cmd, m.Attrs...)), "\n")
}

func pmiKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/'
}

// kv is shorthand for building attribute lists.
func kv(key, value string) pmiAttr { return pmiAttr{Key: key, Value: value} }

// appendPMI1 appends "cmd=NAME k=v ...\n".
func appendPMI1(b []byte, cmd string, attrs ...pmiAttr) []byte {
	b = append(b, "cmd="...)
	b = append(b, cmd...)
	for _, a := range attrs {
		b = append(b, ' ')
		b = append(b, a.Key...)
		if !a.NoValue {
			b = append(b, '=')
			b = append(b, a.Value...)
		}
	}
	return append(b, '\n')
}

// appendPMI2 appends the 6-character length and "cmd=NAME;k=v;...;", with
// ';' in values written as ";;".
func appendPMI2(b []byte, cmd string, attrs ...pmiAttr) []byte {
	start := len(b)
	b = append(b, "      cmd="...)
	b = append(b, strings.ReplaceAll(cmd, ";", ";;")...)
	b = append(b, ';')
	for _, a := range attrs {
		b = append(b, a.Key...)
		if !a.NoValue {
			b = append(b, '=')
			b = append(b, strings.ReplaceAll(a.Value, ";", ";;")...)
		}
		b = append(b, ';')
	}
	n := len(b) - start - 6
	copy(b[start:start+6], fmt.Sprintf("%-6d", n))
	return b
}

// parsePMI1 parses one PMI-1 line (with or without its trailing newline).
func parsePMI1(line []byte) (pmiMsg, error) {
	s := strings.TrimSuffix(string(line), "\n")
	if !strings.HasPrefix(s, "cmd=") {
		return pmiMsg{}, fmt.Errorf("PMI-1 message %q does not start with \"cmd=\"", clip(s))
	}
	var m pmiMsg
	haveCmd := false
	i := 0
	for {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i == len(s) {
			break
		}
		k := i
		for i < len(s) && pmiKeyByte(s[i]) {
			i++
		}
		if k == i {
			return pmiMsg{}, fmt.Errorf("PMI-1 message %q: expected a key at byte %d, got %q", clip(s), i, s[i])
		}
		a := pmiAttr{Key: s[k:i]}
		switch {
		case i == len(s) || s[i] == ' ':
			a.NoValue = true
		case s[i] == '=':
			i++
			var v strings.Builder
			for i < len(s) && s[i] != ' ' {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				v.WriteByte(s[i])
				i++
			}
			if v.Len() == 0 {
				return pmiMsg{}, fmt.Errorf("PMI-1 message %q: key %q has an empty value", clip(s), a.Key)
			}
			a.Value = v.String()
		default:
			return pmiMsg{}, fmt.Errorf("PMI-1 message %q: invalid byte %q after key %q", clip(s), s[i], a.Key)
		}
		if a.Key == "cmd" && !haveCmd {
			if a.NoValue {
				return pmiMsg{}, fmt.Errorf("PMI-1 message %q: cmd has no value", clip(s))
			}
			m.Cmd, haveCmd = a.Value, true
			continue
		}
		m.Attrs = append(m.Attrs, a)
	}
	return m, nil
}

// parsePMI2 parses the payload of one PMI-2 message (after the length).
func parsePMI2(p []byte) (pmiMsg, error) {
	s := string(p)
	if !strings.HasPrefix(s, "cmd=") {
		return pmiMsg{}, fmt.Errorf("PMI-2 message %q does not start with \"cmd=\"", clip(s))
	}
	var m pmiMsg
	haveCmd := false
	i := 0
	for i < len(s) {
		k := i
		for i < len(s) && pmiKeyByte(s[i]) {
			i++
		}
		if k == i {
			return pmiMsg{}, fmt.Errorf("PMI-2 message %q: expected a key at byte %d, got %q", clip(s), i, s[i])
		}
		a := pmiAttr{Key: s[k:i]}
		switch {
		case i == len(s) || s[i] == ';':
			a.NoValue = true
			if i < len(s) {
				i++
			}
		case s[i] == '=':
			i++
			var v strings.Builder
			for i < len(s) {
				if s[i] == ';' {
					if i+1 < len(s) && s[i+1] == ';' {
						v.WriteByte(';')
						i += 2
						continue
					}
					i++
					break
				}
				v.WriteByte(s[i])
				i++
			}
			a.Value = v.String()
		default:
			return pmiMsg{}, fmt.Errorf("PMI-2 message %q: invalid byte %q after key %q", clip(s), s[i], a.Key)
		}
		if a.Key == "cmd" && !haveCmd {
			if a.Value == "" {
				return pmiMsg{}, fmt.Errorf("PMI-2 message %q: cmd has no value", clip(s))
			}
			m.Cmd, haveCmd = a.Value, true
			continue
		}
		m.Attrs = append(m.Attrs, a)
	}
	return m, nil
}

var errPMILineTooLong = errors.New("message longer than the limit")

// readPMI1 reads one PMI-1 line.
func readPMI1(r *bufio.Reader) (pmiMsg, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > pmiMaxLine {
			return pmiMsg{}, fmt.Errorf("PMI-1 line of more than %d bytes: %w", pmiMaxLine, errPMILineTooLong)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return pmiMsg{}, err
		}
		return parsePMI1(line)
	}
}

// readPMI2 reads one PMI-2 message: the 6-character length, then the payload.
func readPMI2(r *bufio.Reader) (pmiMsg, error) {
	var hdr [6]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return pmiMsg{}, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(hdr[:])))
	if err != nil || n < 0 {
		return pmiMsg{}, fmt.Errorf("PMI-2 length field %q is not a non-negative decimal number", hdr[:])
	}
	if n > pmiMaxLine {
		return pmiMsg{}, fmt.Errorf("PMI-2 length field %d exceeds the limit of %d: %w", n, pmiMaxLine, errPMILineTooLong)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return pmiMsg{}, err
	}
	return parsePMI2(p)
}

// clip shortens s for error messages.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
