package gctarget

import (
	"os"
	"path/filepath"
	"testing"
)

func TestContainerLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
		ok    bool
	}{
		{"cgroup v2, a limit", map[string]string{"memory.max": "268435456\n"}, 268435456, true},
		{"cgroup v2, none", map[string]string{"memory.max": "max\n"}, 0, false},
		{"cgroup v1, a limit", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, 536870912, true},
		{"cgroup v1, none", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false},
		{"no cgroup files", nil, 0, false},
		{"garbage", map[string]string{"memory.max": "lots\n"}, 0, false},
	} {
		root := t.TempDir()
		for name, body := range tc.files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, ok := containerLimit(root)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
