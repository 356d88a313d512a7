package redisproc

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
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
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st CommandStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.Usec, _ = strconv.ParseInt(v, 10, 64)
			case "usec_per_call":
				st.Per, _ = strconv.ParseFloat(v, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out, nil
}
