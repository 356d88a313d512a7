// Package redisinfo reads fields of an INFO reply ("name:value" lines),
// and Redis's busy time from INFO cpu, which the pace and make bench
// must read the same way.
package redisinfo

import (
	"strconv"
	"strings"
)

// Field is the value of "name:value" in an INFO reply; "" if absent.
func Field(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Float is Field as a number; 0 if absent or not a number.
func Float(info, name string) float64 {
	v, _ := strconv.ParseFloat(Field(info, name), 64)
	return v
}

// CPU is the CPU time Redis has used since it started (seconds), from an
// INFO cpu reply: used_cpu_sys + used_cpu_user, the main thread's and
// its helpers' both.
func CPU(info string) float64 {
	return Float(info, "used_cpu_sys") + Float(info, "used_cpu_user")
}
