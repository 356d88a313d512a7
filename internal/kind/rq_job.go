package kind

import (
	"fmt"
	"time"
)

// parseRQTime reads a timestamp of an RQ job or worker hash (enqueued_at,
// started_at, last_heartbeat), which RQ 1.13 writes with utcformat:
// "2006-01-02T15:04:05.000000Z" (UTC); older releases left out the
// fraction. It returns Unix ms.
func parseRQTime(v string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, fmt.Errorf("timestamp %q is not RQ's ISO 8601 UTC form", v)
	}
	return t.UnixMilli(), nil
}
