// Package reliabilitytest holds the tests of an operator's bad day, each
// against real servers: data that vanishes (a flush, a restart, a
// failover to a lagging replica, a reload to another Redis), Redis TIME
// stepping back and forward, reloads in a loop against the key budget and
// the schedule, Redis down for a while, an ACL narrower than a family's
// pattern, rotated TLS client certificates, and sets above
// max_members_per_key that expire before their slots.
//
// The exporter is wired the way main does it (redisconn builds the
// client, sweep.New takes the previous sweeper on a reload, the collector
// reads the current sweeper's snapshot). The package has no code outside
// its tests.
package reliabilitytest
