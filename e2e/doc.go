// Package e2e holds the end-to-end test of the whole alerting path: a real
// redis-server, slot_exporter and slotsim (both built from this module),
// Prometheus loading the shipped rules shortened by alerts/rulescale, and
// Alertmanager delivering to a webhook inside the test.
//
// It checks what unit tests of each piece cannot: that the metric names the
// exporter emits, the rules evaluate, the labels the alerts carry and the
// queries the dashboards run all fit together, on a simulated incident whose
// ground truth (which users leak) is known.
//
// The package has no code outside its tests.
package e2e
