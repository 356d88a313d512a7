// Package kindtest holds the scenario tests of the kinds other than slot
// sets (ratelimit, lock, list, stream): each sets up keys with known truth
// in a real redis-server, through the recipe packages or plain commands,
// steps sweeps by hand, and checks the exact figures the exporter reports.
package kindtest
