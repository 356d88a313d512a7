package collector

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// The sampling note goes into HELP so that whoever reads /metrics learns
// that the numbers come from the background sweep, not from this scrape.
const sampled = " Sampled in the background every sampling.interval; a scrape never touches Redis."

var (
	descSets          = desc("slot_sets", "Keys of the family seen in the last sweep."+sampled, "family")
	descMembers       = desc("slot_members", "Slot-set members by state (live, stale, expired, zombie, future)."+sampled, "family", "state")
	descUsersActive   = desc("slot_users_active", "Users with used > 0."+sampled, "family")
	descUsersAtLimit  = desc("slot_users_at_limit", "Users with used >= limit."+sampled, "family")
	descUsersOver     = desc("slot_users_over_limit", "Users with used > limit; should be impossible."+sampled, "family")
	descUsersFloor    = desc("slot_users_floor_nonzero", "Users whose used has not been 0 for at least leaks.floor_window."+sampled, "family")
	descUserUsedMax   = desc("slot_user_used_max", "A user's maximum used over sampling.window. Capped to leaks.per_user_series users per family."+sampled, "family", "user")
	descUserFloor     = desc("slot_user_floor_seconds", "Seconds since the user's used was last observed at 0 (0 if it is 0 now)."+sampled, "family", "user")
	descAcquires      = desc("slot_acquires_total", "Slot-set members seen for the first time."+sampled, "family")
	descEnded         = desc("slot_holds_ended_total", "Members gone, by outcome: released, expired (the holder died and the TTL cleaned up), lost (the whole keyspace vanished, e.g. Redis restarted empty)."+sampled, "family", "outcome")
	descHold          = desc("slot_hold_duration_seconds", "First-seen to last-seen of ended holds."+sampled, "family")
	descHeartbeats    = desc("slot_heartbeats_total", "Heartbeats inferred from score advances."+sampled, "family")
	descNoTTL         = desc("slot_sets_without_ttl", "Slot-set keys with no expiry (PTTL -1): idle sets never evaporate."+sampled, "family")
	descEarly         = desc("slot_sets_expiring_early", "Slot-set keys whose own expiry comes before their latest unexpired member's."+sampled, "family")
	descNegative      = desc("slot_counters_negative", "Counter keys below 0 (DECR without INCR)."+sampled, "family")
	descUp            = desc("slot_exporter_up", "1 if the last sweep of every family succeeded.")
	descSweepDuration = desc("slot_exporter_sweep_duration_seconds", "Duration of the last sweep of a family.", "family")
	descLastSweep     = desc("slot_exporter_last_sweep_timestamp_seconds", "End time of the last successful sweep of a family.", "family")
	descSweepErrors   = desc("slot_exporter_sweep_errors_total", "Failed sweeps of a family.", "family")
	descOverruns      = desc("slot_exporter_sweep_overruns_total", "Sweeps of a family that did not finish inside sampling.interval.", "family")
	descKeysScanned   = desc("slot_exporter_keys_scanned_total", "Keys read.", "family")
	descKeysSkipped   = desc("slot_exporter_keys_skipped_total", "Keys matched but not used, by reason: wrong_type, bad_user, oversized, bad_value.", "family", "reason")
	descClockSkew     = desc("slot_exporter_clock_skew_seconds", "Exporter clock minus Redis TIME.")
	descReload        = desc("slot_exporter_config_last_reload_successful", "0 after a refused config reload, until a good one.")
	descDropped       = desc("slot_exporter_user_series_dropped", "Per-user series left out by leaks.per_user_series in the last sweep.", "family")
)

// Collector turns the latest snapshot into const metrics at scrape time.
type Collector struct {
	snapshot func() *Snapshot
	reloadOK func() bool
	now      func() time.Time
}

// New returns a collector reading snapshots from snapshot; reloadOK reports
// whether the last config reload was accepted.
func New(snapshot func() *Snapshot, reloadOK func() bool) *Collector {
	return &Collector{snapshot: snapshot, reloadOK: reloadOK, now: time.Now}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descSets, descMembers, descUsersActive, descUsersAtLimit, descUsersOver, descUsersFloor,
		descUserUsedMax, descUserFloor, descAcquires, descEnded, descHold, descHeartbeats, descNoTTL,
		descEarly, descNegative, descUp, descSweepDuration, descLastSweep, descSweepErrors, descOverruns,
		descKeysScanned, descKeysSkipped, descClockSkew, descReload, descDropped,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	reload := 1.0
	if c.reloadOK != nil && !c.reloadOK() {
		reload = 0
	}
	gauge(descReload, reload)

	s := c.snapshot()
	if s == nil {
		gauge(descUp, 0)
		return
	}
	gauge(descUp, boolf(s.Up()))
	if s.HaveClock {
		gauge(descClockSkew, s.ClockSkew.Seconds())
	}
	now := c.now()
	for _, f := range s.Families {
		fam := f.Name
		t := &f.Totals
		gauge(descSweepDuration, f.Duration.Seconds(), fam)
		if !f.LastSuccess.IsZero() {
			gauge(descLastSweep, float64(f.LastSuccess.UnixNano())/1e9, fam)
		}
		counter(descSweepErrors, float64(t.SweepErrors), fam)
		counter(descOverruns, float64(t.Overruns), fam)
		counter(descKeysScanned, float64(t.KeysScanned), fam)
		for i, reason := range skipReasonNames {
			counter(descKeysSkipped, float64(t.Skipped[i]), fam, reason)
		}
		if !f.Fresh(now) {
			// No good sweep within 2 x interval: domain series go away
			// instead of repeating frozen numbers that alerts would trust.
			continue
		}
		g := &f.Gauges
		gauge(descDropped, float64(g.SeriesDropped), fam)
		gauge(descSets, float64(g.Sets), fam)
		gauge(descUsersActive, float64(g.Users.Active), fam)
		gauge(descUsersAtLimit, float64(g.Users.AtLimit), fam)
		gauge(descUsersOver, float64(g.Users.OverLimit), fam)
		gauge(descUsersFloor, float64(g.Users.FloorNonzero), fam)
		seen := make(map[string]struct{}, len(g.UserSeries))
		for _, u := range g.UserSeries {
			label := UserLabel(u.User)
			if _, dup := seen[label]; dup {
				continue
			}
			seen[label] = struct{}{}
			gauge(descUserUsedMax, float64(u.UsedMax), fam, label)
			gauge(descUserFloor, u.FloorSeconds, fam, label)
		}
		if f.Kind == "counter" {
			gauge(descNegative, float64(g.CountersNegative), fam)
			continue
		}
		for i, name := range stateNames {
			gauge(descMembers, float64(g.Members[i]), fam, name)
		}
		gauge(descNoTTL, float64(g.WithoutTTL), fam)
		gauge(descEarly, float64(g.ExpiringEarly), fam)
		counter(descAcquires, float64(t.Acquires), fam)
		counter(descHeartbeats, float64(t.Heartbeats), fam)
		for i, o := range outcomeNames {
			counter(descEnded, float64(t.Ended[i]), fam, o)
		}
		buckets := make(map[float64]uint64, len(HoldBuckets))
		for i, b := range HoldBuckets {
			buckets[b] = t.HoldCounts[i]
		}
		ch <- prometheus.MustNewConstHistogram(descHold, t.HoldCount, t.HoldSum, buckets, fam)
	}
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// UserLabel makes a user id safe as a label value: label values must be
// valid UTF-8, and user ids come from key names, which are arbitrary bytes.
// Invalid bytes become \xNN, and a backslash is doubled so that the result
// stays distinct from a user id that spells the escape out.
func UserLabel(u string) string {
	if utf8.ValidString(u) && !strings.Contains(u, `\`) {
		return u
	}
	var b strings.Builder
	for i := 0; i < len(u); {
		r, n := utf8.DecodeRuneInString(u[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, u[i])
		case r == '\\':
			b.WriteString(`\\`)
		default:
			b.WriteString(u[i : i+n])
		}
		i += n
	}
	return b.String()
}
