package lint

import "slices"

// MetricType is how a catalog metric is exposed, in the words of the
// Prometheus exposition format.
type MetricType string

// The metric types of the catalog.
const (
	Gauge     MetricType = "gauge"
	Counter   MetricType = "counter"
	Histogram MetricType = "histogram"
)

// Metric is one row of the metric catalog of DESIGN.md.
type Metric struct {
	Name string
	Type MetricType
	// Labels are the labels the exporter puts on the metric, family first,
	// then user, then the rest. Target labels (job, instance) are
	// Prometheus' and are not listed; nor is a histogram bucket's le.
	Labels []string
}

// Catalog is the metric catalog of DESIGN.md: the only metric names that rules
// and dashboards may use, besides the recording rules of
// alerts/slot_exporter.rules.yml and Prometheus' own `up`. It is exported so
// that the exporter's tests can compare it with the descriptors the exporter
// really registers.
var Catalog = []Metric{
	// Domain metrics, shared by every kind. All carry family.
	{"slot_sets", Gauge, []string{"family"}},
	{"slot_members", Gauge, []string{"family", "state"}},
	{"slot_users_active", Gauge, []string{"family"}},
	{"slot_users_at_limit", Gauge, []string{"family"}},
	{"slot_users_over_limit", Gauge, []string{"family"}},
	{"slot_users_floor_nonzero", Gauge, []string{"family"}},
	{"slot_user_used_max", Gauge, []string{"family", "user"}},
	{"slot_user_floor_seconds", Gauge, []string{"family", "user"}},
	{"slot_acquires_total", Counter, []string{"family"}},
	{"slot_holds_ended_total", Counter, []string{"family", "outcome"}},
	{"slot_hold_duration_seconds", Histogram, []string{"family"}},
	{"slot_heartbeats_total", Counter, []string{"family"}},
	{"slot_sets_without_ttl", Gauge, []string{"family"}},
	{"slot_sets_expiring_early", Gauge, []string{"family"}},
	{"slot_counters_negative", Gauge, []string{"family"}},

	// Kind ratelimit.
	{"slot_ratelimit_keys_without_ttl", Gauge, []string{"family"}},
	{"slot_ratelimit_keys_ttl_beyond_window", Gauge, []string{"family"}},
	{"slot_ratelimit_callers_locked_out", Gauge, []string{"family"}},

	// Kind list.
	{"slot_queue_items", Gauge, []string{"family"}},
	{"slot_queues_stalled", Gauge, []string{"family"}},
	{"slot_queue_head_wait_seconds", Gauge, []string{"family", "user"}},

	// Kind stream.
	{"slot_stream_entries", Gauge, []string{"family"}},
	{"slot_stream_pending", Gauge, []string{"family"}},
	{"slot_stream_lag", Gauge, []string{"family"}},
	{"slot_stream_pending_stuck", Gauge, []string{"family"}},
	{"slot_stream_consumers_dead", Gauge, []string{"family"}},
	{"slot_stream_redelivered", Gauge, []string{"family"}},
	{"slot_stream_oldest_pending_seconds", Gauge, []string{"family", "user", "group"}},

	// Queue frameworks (bullmq, sidekiq, rq, celery): the queue stands
	// where a user stands.
	{"slot_jobs", Gauge, []string{"family", "state"}},
	{"slot_jobs_oldest_seconds", Gauge, []string{"family", "state"}},
	{"slot_workers", Gauge, []string{"family", "state"}},
	{"slot_jobs_lost_total", Counter, []string{"family"}},
	{"slot_queue_jobs", Gauge, []string{"family", "queue", "state"}},

	// The family's configuration, for thresholds that follow it.
	{"slot_family_info", Gauge, []string{"family", "kind"}},
	{"slot_family_limit", Gauge, []string{"family"}},
	{"slot_family_floor_window_seconds", Gauge, []string{"family"}},
	{"slot_family_max_wait_seconds", Gauge, []string{"family"}},

	// The exporter's own metrics.
	{"slot_exporter_up", Gauge, nil},
	{"slot_exporter_sweep_duration_seconds", Gauge, []string{"family"}},
	{"slot_exporter_last_sweep_timestamp_seconds", Gauge, []string{"family"}},
	{"slot_exporter_sweep_errors_total", Counter, []string{"family"}},
	{"slot_exporter_sweep_overruns_total", Counter, []string{"family"}},
	{"slot_exporter_sampling_period_seconds", Gauge, []string{"family"}},
	{"slot_exporter_keys_scanned_total", Counter, []string{"family"}},
	{"slot_exporter_keys_skipped_total", Counter, []string{"family", "reason"}},
	{"slot_exporter_clock_skew_seconds", Gauge, nil},
	{"slot_exporter_config_last_reload_successful", Gauge, nil},
	{"slot_exporter_user_series_dropped", Gauge, []string{"family"}},
	{"slot_exporter_releases_total", Counter, []string{"result"}},
	// client_golang's version collector sets these.
	{"slot_exporter_build_info", Gauge, []string{"branch", "goarch", "goos", "goversion", "revision", "tags", "version"}},
}

// prometheusMetrics are written by Prometheus itself for every target.
var prometheusMetrics = []Metric{
	{"up", Gauge, nil},
}

// CatalogMetric returns the catalog row named name.
func CatalogMetric(name string) (Metric, bool) {
	i := slices.IndexFunc(Catalog, func(m Metric) bool { return m.Name == name })
	if i < 0 {
		return Metric{}, false
	}
	return Catalog[i], true
}

// seriesNames are the names a metric's series carry: a histogram's
// _bucket, _sum and _count, the metric's own name otherwise.
func (m Metric) seriesNames() []string {
	if m.Type == Histogram {
		return []string{m.Name + "_bucket", m.Name + "_sum", m.Name + "_count"}
	}
	return []string{m.Name}
}

// tracked returns which of the tracked labels (family, user) the metric
// carries.
func (m Metric) tracked() map[string]bool {
	l := map[string]bool{}
	for _, lb := range trackedLabels {
		if slices.Contains(m.Labels, lb) {
			l[lb] = true
		}
	}
	return l
}
