package gctarget

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestApply runs itself in child processes: the runtime reads GOGC at
// start.
func TestApply(t *testing.T) {
	if os.Getenv("GCTARGET_CHILD") != "" {
		fmt.Printf("target=%d\n", Apply())
		return
	}
	for env, want := range map[string]string{"": "target=50", "GOGC=200": "target=200", "GOGC=off": "target=-1"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestApply$")
		cmd.Env = slices.DeleteFunc(append(os.Environ(), "GCTARGET_CHILD=1"), func(e string) bool { return strings.HasPrefix(e, "GOGC=") })
		if env != "" {
			cmd.Env = append(cmd.Env, env)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%q: %v", env, err)
		}
		if got := strings.Fields(string(out))[0]; got != want {
			t.Errorf("with %q: %s, want %s", env, got, want)
		}
	}
}
