package lint

// Catalog is the metric catalog of DESIGN.md: the only metric names that rules
// and dashboards may use, besides the recording rules of
// alerts/slot_exporter.rules.yml and Prometheus' own `up`.
var Catalog = []string{
	// Domain metrics. All carry family.
	"slot_sets",
	"slot_members", // state
	"slot_users_active",
	"slot_users_at_limit",
	"slot_users_over_limit",
	"slot_users_floor_nonzero",
	"slot_user_used_max",      // user
	"slot_user_floor_seconds", // user
	"slot_acquires_total",
	"slot_holds_ended_total", // outcome: released, expired, lost
	"slot_hold_duration_seconds_bucket",
	"slot_hold_duration_seconds_sum",
	"slot_hold_duration_seconds_count",
	"slot_heartbeats_total",
	"slot_sets_without_ttl",
	"slot_sets_expiring_early",
	"slot_counters_negative",

	// The exporter's own metrics.
	"slot_exporter_up",
	"slot_exporter_sweep_duration_seconds",
	"slot_exporter_last_sweep_timestamp_seconds",
	"slot_exporter_sweep_errors_total",
	"slot_exporter_sweep_overruns_total",
	"slot_exporter_keys_scanned_total",
	"slot_exporter_keys_skipped_total", // reason
	"slot_exporter_clock_skew_seconds",
	"slot_exporter_config_last_reload_successful",
	"slot_exporter_user_series_dropped",
	"slot_exporter_build_info",

	// Written by Prometheus for every target.
	"up",
}

// withoutFamily lists the catalog metrics that do not carry the family label:
// they describe the whole exporter (or, for up, the scrape).
var withoutFamily = map[string]bool{
	"slot_exporter_up": true,
	"slot_exporter_config_last_reload_successful": true,
	"slot_exporter_build_info":                    true,
	"slot_exporter_clock_skew_seconds":            true,
	"up":                                          true,
}

// withUser lists the catalog metrics that carry the user label.
var withUser = map[string]bool{
	"slot_user_used_max":      true,
	"slot_user_floor_seconds": true,
}

// catalogLabels returns the labels (of family and user) that a catalog metric
// carries.
func catalogLabels(name string) map[string]bool {
	l := map[string]bool{}
	if !withoutFamily[name] {
		l["family"] = true
	}
	if withUser[name] {
		l["user"] = true
	}
	return l
}
