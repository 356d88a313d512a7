// Package collector turns the latest snapshot into Prometheus metrics at
// scrape time: const metrics built from an immutable snapshot, so that a
// scrape never touches Redis and a user who has gone leaves no series
// behind. It is the only Prometheus code besides main.
package collector

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotexporter/slot_exporter/internal/snapshot"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// The exporter's own metrics.
var (
	descUp            = desc("slot_exporter_up", "1 if the last sweep of every family succeeded.")
	descSweepDuration = desc("slot_exporter_sweep_duration_seconds", "Duration of the last sweep of a family.", "family")
	descLastSweep     = desc("slot_exporter_last_sweep_timestamp_seconds", "End time of the last successful sweep of a family.", "family")
	descSweepErrors   = desc("slot_exporter_sweep_errors_total", "Failed sweeps of a family.", "family")
	descOverruns      = desc("slot_exporter_sweep_overruns_total", "Sweeps of a family that did not finish inside sampling.interval.", "family")
	descKeysScanned   = desc("slot_exporter_keys_scanned_total", "Keys read.", "family")
	descKeysSkipped   = desc("slot_exporter_keys_skipped_total", "Keys matched but not used, by reason: wrong_type, bad_user, oversized, bad_value, no_permission, value_too_large.", "family", "reason")
	descClockSkew     = desc("slot_exporter_clock_skew_seconds", "Exporter clock minus Redis TIME.")
	descReload        = desc("slot_exporter_config_last_reload_successful", "0 after a refused config reload, until a good one.")
	descDropped       = desc("slot_exporter_user_series_dropped", "Per-user series left out by leaks.per_user_series in the last sweep.", "family")
	descReleases      = desc("slot_exporter_releases_total", "Release actions from the on-call page or the release command, by result: previewed, released, refused, failed.", "result")
)

// domainDescs are the catalog's metrics as descriptors, built once.
var domainDescs = func() map[*snapshot.Metric]*prometheus.Desc {
	m := make(map[*snapshot.Metric]*prometheus.Desc, len(snapshot.Domain))
	for _, d := range snapshot.Domain {
		labels := []string{"family"}
		if d.PerUser {
			user := "user"
			if d.UserLabel != "" {
				user = d.UserLabel
			}
			labels = append(labels, user)
		}
		m[d] = desc(d.Name, d.Help, append(labels, d.Labels...)...)
	}
	return m
}()

// ReleaseResults are the label values of slot_exporter_releases_total.
var ReleaseResults = []string{"previewed", "released", "refused", "failed"}

// Collector turns the latest snapshot into const metrics at scrape time.
type Collector struct {
	snapshot func() *snapshot.Snapshot
	reloadOK func() bool
	releases func() map[string]uint64
	now      func() time.Time
}

// Options are the collector's sources besides the snapshot.
type Options struct {
	// ReloadOK reports whether the last config reload was accepted.
	ReloadOK func() bool
	// Releases reports release actions by result (nil: none yet).
	Releases func() map[string]uint64
}

// New returns a collector reading snapshots from snap.
func New(snap func() *snapshot.Snapshot, o Options) *Collector {
	return &Collector{snapshot: snap, reloadOK: o.ReloadOK, releases: o.Releases, now: time.Now}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descUp, descSweepDuration, descLastSweep, descSweepErrors, descOverruns,
		descKeysScanned, descKeysSkipped, descClockSkew, descReload, descDropped, descReleases,
	} {
		ch <- d
	}
	for _, m := range snapshot.Domain {
		ch <- domainDescs[m]
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
	value := func(fam string, v snapshot.Value, user ...string) {
		t := prometheus.GaugeValue
		if v.Metric.Type == snapshot.Counter {
			t = prometheus.CounterValue
		}
		labels := append(append([]string{fam}, user...), v.Labels...)
		ch <- prometheus.MustNewConstMetric(domainDescs[v.Metric], t, v.V, labels...)
	}
	reload := 1.0
	if c.reloadOK != nil && !c.reloadOK() {
		reload = 0
	}
	gauge(descReload, reload)
	var releases map[string]uint64
	if c.releases != nil {
		releases = c.releases()
	}
	for _, r := range ReleaseResults {
		counter(descReleases, float64(releases[r]), r)
	}

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
		gauge(domainDescs[snapshot.FamilyInfo], 1, fam, f.Kind)
		if f.HasLimit {
			gauge(domainDescs[snapshot.FamilyLimit], f.Limit, fam)
		}
		gauge(domainDescs[snapshot.FamilyFloorLimit], f.FloorWindow.Seconds(), fam)
		if f.MaxWait > 0 {
			gauge(domainDescs[snapshot.FamilyMaxWait], f.MaxWait.Seconds(), fam)
		}
		gauge(descSweepDuration, f.Duration.Seconds(), fam)
		if !f.LastSuccess.IsZero() {
			gauge(descLastSweep, float64(f.LastSuccess.UnixNano())/1e9, fam)
		}
		counter(descSweepErrors, float64(f.SweepErrors), fam)
		counter(descOverruns, float64(f.Overruns), fam)
		counter(descKeysScanned, float64(f.KeysScanned), fam)
		for _, sk := range f.Skipped {
			counter(descKeysSkipped, float64(sk.N), fam, sk.Label)
		}
		for _, v := range f.Gauges {
			if v.Metric == snapshot.SamplingPeriod {
				value(fam, v)
			}
		}
		if !f.Fresh(now) {
			// No good sweep within 2 x interval: domain series go away
			// instead of repeating frozen numbers that alerts would trust.
			continue
		}
		gauge(descDropped, float64(f.SeriesDropped), fam)
		gauge(domainDescs[snapshot.Sets], float64(f.Sets), fam)
		gauge(domainDescs[snapshot.UsersActive], float64(f.Aggregates.Active), fam)
		if f.HasLimit {
			gauge(domainDescs[snapshot.UsersAtLimit], float64(f.Aggregates.AtLimit), fam)
			if f.OverLimitShown {
				gauge(domainDescs[snapshot.UsersOver], float64(f.Aggregates.OverLimit), fam)
			}
		}
		gauge(domainDescs[snapshot.UsersFloor], float64(f.Aggregates.FloorNonzero), fam)
		seen := make(map[string]struct{}, len(f.Users))
		for _, u := range f.Users {
			label := UserLabel(u.User)
			if _, dup := seen[label]; dup {
				continue
			}
			seen[label] = struct{}{}
			gauge(domainDescs[snapshot.UserUsedMax], float64(u.UsedMax), fam, label)
			gauge(domainDescs[snapshot.UserFloor], u.FloorSeconds, fam, label)
			for _, v := range u.Extra {
				value(fam, v, label)
			}
		}
		for _, v := range f.Gauges {
			if v.Metric != snapshot.SamplingPeriod {
				value(fam, v)
			}
		}
		for _, v := range f.Counters {
			value(fam, v)
		}
		if h := f.Holds; h != nil {
			buckets := make(map[float64]uint64, len(h.Bounds))
			for i, b := range h.Bounds {
				buckets[b] = h.Counts[i]
			}
			ch <- prometheus.MustNewConstHistogram(domainDescs[snapshot.HoldDuration], h.Count, h.Sum, buckets, fam)
		}
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
