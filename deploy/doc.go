// Package deploy holds a docker compose setup that runs slot_exporter with
// Redis, the slotsim simulator, Prometheus (with alerts/slot_exporter.rules.yml),
// Alertmanager and Grafana (with dashboards/).
//
// The package has no Go code of its own: its test checks that the compose
// file parses and its bind mounts exist, and that the Prometheus,
// Alertmanager, Grafana and exporter configurations are valid (promtool and
// amtool must be installed).
package deploy
