// Package dashboards holds slot_exporter's Grafana dashboards (JSON models):
// slot-overview.json ("are limits leaking right now, and for whom?") and
// slot-user.json (one user's used_max and floor age over time).
//
// The package has no Go code of its own: its test checks every dashboard with
// alerts/lint (PromQL parses, metrics are in the catalog or are recording
// rules, panels have titles and units, datasources go through the
// ${datasource} variable).
package dashboards
