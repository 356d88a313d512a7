// Package dashboards holds slot_exporter's Grafana dashboards (JSON models):
// slot-overview.json ("are limits leaking right now, and for whom?", with a
// row per kind: rate limits, locks, list queues, streams) and slot-user.json
// (one user's used_max and floor age against the family's floor window, and
// the queue head wait or the oldest pending stream entry of that user).
//
// The package has no Go code of its own: alerts/dashboards (in the alerts
// module, beside the PromQL parser) checks every dashboard with alerts/lint (PromQL parses, metrics are in the catalog or are recording
// rules, panels have titles and units, datasources go through the
// ${datasource} variable), checks that floor ages turn red at the family's
// configured floor window rather than at a fixed number of seconds, and that
// every metric of the newer kinds is on the dashboards.
package dashboards
