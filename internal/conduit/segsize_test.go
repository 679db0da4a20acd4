package conduit

import "testing"

func TestParseSegSize(t *testing.T) {
	const mem = 16 << 30
	cases := []struct {
		in    string
		ranks int
		want  uint64
	}{
		{"67108864", 1, 64 << 20},
		{"64M", 1, 64 << 20},
		{"64MB", 4, 64 << 20},
		{"64MiB", 1, 64 << 20},
		{"1g", 1, 1 << 30},
		{"0.5", 1, 8 << 30},
		{"0.5/H", 4, 2 << 30},
		{"64M/H", 4, 16 << 20},
		{"100", 1, 4096},
		{"5000", 1, 4096},
	}
	for _, c := range cases {
		got, err := ParseSegSize(c.in, mem, c.ranks)
		if err != nil || got != c.want {
			t.Errorf("ParseSegSize(%q, %d ranks) = %d, %v; want %d", c.in, c.ranks, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "abc", "-1", "0", "NaN", "1Q", "/H", "0x10"} {
		if _, err := ParseSegSize(bad, mem, 1); err == nil {
			t.Errorf("ParseSegSize(%q) accepted", bad)
		}
	}
}

func FuzzParseSegSize(f *testing.F) {
	for _, s := range []string{"64MB", "0.5/H", "1G", "4096", "2T/H"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSegSize(s, 16<<30, 3)
		if err == nil && (n < pageSize || n%pageSize != 0) {
			t.Fatalf("ParseSegSize(%q) = %d: not a positive page multiple", s, n)
		}
	})
}
