package redisinfo

import "testing"

func TestFields(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:9.000000\r\nrun_id:abc\r\nbad:x\r\n"
	if got := Field(info, "run_id"); got != "abc" {
		t.Errorf("run_id %q, want abc", got)
	}
	if got := Field(info, "missing"); got != "" {
		t.Errorf("missing %q, want empty", got)
	}
	if got := Float(info, "bad"); got != 0 {
		t.Errorf("a value that is not a number gave %v, want 0", got)
	}
	// used_cpu_sys_children is the fork's (snapshots), not the server's.
	if got := CPU(info); got != 3.75 {
		t.Errorf("CPU %v, want 3.75", got)
	}
}
