package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, and whatever it accepts re-validates.
// `go test ./config` runs the seeds below and the corpus in
// testdata/fuzz/FuzzParse; `go test -run XXX -fuzz FuzzParse ./config`
// searches for more.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/*.yml", "../examples/*.yml"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned a config with its error %v", err)
			}
			if err.Error() == "" {
				t.Fatal("Parse returned an empty error")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that Validate refuses: %v\n%s", err, b)
		}
		if len(c.Families) == 0 {
			t.Fatal("Parse accepted a config without families")
		}
		for i := range c.Families {
			if c.Families[i].UserRegexp == nil {
				t.Fatalf("families[%d] has no UserRegexp", i)
			}
			// Must not panic.
			c.Families[i].UserOf(c.Families[i].Match)
		}
		// Deterministic: the same bytes give the same verdict.
		if _, err := Parse(b); err != nil {
			t.Fatalf("second Parse failed: %v", err)
		}
	})
}

// FuzzFamilyFlag: any --family value gives a config or an error that names
// the flag, and never a panic (a framework kind's "b=bullmq:" once indexed
// past its fields).
func FuzzFamilyFlag(f *testing.F) {
	for _, v := range []string{"s=slotset:a:*,limit=3", "b=bullmq", "b=bullmq:", "b=bullmq:p,queues=a,queues=b", "c=celery,", "s=slotset:", "=", ":", ",", "s=,", "s=slotset:a:*,user=[a-z]+:(.*)"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		_, err := ParseWith(nil, Overrides{Addr: "h:1", Families: []string{v}})
		if err != nil && !strings.Contains(err.Error(), "--family") {
			t.Fatalf("%q: the error does not name the flag: %v", v, err)
		}
	})
}
