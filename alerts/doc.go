// Package alerts holds slot_exporter's Prometheus alerting and recording rules
// (slot_exporter.rules.yml) and their promtool unit tests (tests/1m/*.yml and
// tests/15s/*.yml: the same scenarios sampled at a 1m and at a 15s scrape, off
// the evaluation grid).
//
// The package has no Go code of its own: its tests run `promtool check rules`
// and `promtool test rules` so that `go test ./...` covers the rules, and lint
// them against the metric catalog, the runbook and the unit tests (see
// alerts/lint). alerts/rulescale shortens the rules for end-to-end tests.
package alerts
