package redisproc

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/commandstats"
)

// CommandStat is one command's line of INFO commandstats.
type CommandStat struct {
	Calls int64   `json:"calls"`
	Usec  int64   `json:"usec"`
	Per   float64 `json:"usec_per_call"`
}

// CommandStats reads INFO commandstats of one server, by lower-case command
// name ("zrange", "config|resetstat"): what it ran since it started or
// since its last CONFIG RESETSTAT.
func CommandStats(ctx context.Context, c redis.Cmdable) (map[string]CommandStat, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]CommandStat{}
	for name, st := range commandstats.Parse(info) {
		cs := CommandStat{Calls: st.Calls, Usec: st.Usec}
		if st.Calls > 0 {
			cs.Per = float64(st.Usec) / float64(st.Calls)
		}
		out[name] = cs
	}
	return out, nil
}
