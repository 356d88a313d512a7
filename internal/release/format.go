package release

import (
	"math"
	"strconv"
	"time"
)

// FormatScore writes a score as the scripts compare it: the shortest
// decimal that reads back as the same float, and inf for infinities as
// Redis writes them.
func FormatScore(s float64) string {
	switch {
	case math.IsInf(s, 1):
		return "inf"
	case math.IsInf(s, -1):
		return "-inf"
	}
	if math.Abs(s) < 1e21 {
		return strconv.FormatFloat(s, 'f', -1, 64)
	}
	return strconv.FormatFloat(s, 'g', -1, 64)
}

// FormatTime writes a Redis time in ms as UTC RFC 3339 with milliseconds;
// "never" for +Inf, and the raw number beyond what a date can say.
func FormatTime(ms float64) string {
	switch {
	case math.IsInf(ms, 1):
		return "never"
	case math.IsNaN(ms):
		return ""
	case math.IsInf(ms, -1):
		return "-inf"
	case ms > 253402300799999:
		return FormatScore(ms) + " ms (beyond year 9999)"
	case ms < -62135596800000:
		return FormatScore(ms) + " ms (before year 1)"
	}
	return time.UnixMilli(int64(ms)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
