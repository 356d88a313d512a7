package snapshot

// ValueType is how a catalog metric is exposed.
type ValueType uint8

const (
	Gauge ValueType = iota
	Counter
	HistogramType
)

// Metric is one row of the metric catalog (docs/design.md, "Metric
// catalog"): dashboards, alerts and tests rely on exactly these names.
// Every metric carries family first; per-user ones carry user next; Labels
// are the labels after those.
type Metric struct {
	Name    string
	Help    string
	Type    ValueType
	PerUser bool
	// UserLabel names the per-user label where it is not "user": a queue
	// framework's queue stands where a user stands.
	UserLabel string
	Labels    []string
}

// sampled goes into every domain HELP so that whoever reads /metrics learns
// that the numbers come from the background sweep, not from the scrape.
const sampled = " Sampled in the background every sampling.interval; a scrape never touches Redis."

func domain(name string, t ValueType, help string, labels ...string) *Metric {
	return &Metric{Name: name, Help: help + sampled, Type: t, Labels: labels}
}

func perUser(name, help string, labels ...string) *Metric {
	return &Metric{Name: name, Help: help + " Capped to leaks.per_user_series users per family." + sampled, Type: Gauge, PerUser: true, Labels: labels}
}

// The domain metrics. The collector emits the ones that every kind shares
// from Family's fields; each kind emits its own through Family.Gauges,
// Family.Counters and User.Extra.
var (
	Sets          = domain("slot_sets", Gauge, "Keys of the family seen in the last sweep.")
	Members       = domain("slot_members", Gauge, "Slot-set members (and lock tokens) by state: live, stale, expired, zombie, future.", "state")
	UsersActive   = domain("slot_users_active", Gauge, "Users with used > 0.")
	UsersAtLimit  = domain("slot_users_at_limit", Gauge, "Users with used >= limit.")
	UsersOver     = domain("slot_users_over_limit", Gauge, "Users with used > limit; should be impossible. Not emitted for ratelimit families, where refused hits still count.")
	UsersFloor    = domain("slot_users_floor_nonzero", Gauge, "Users whose used has not been back at its baseline for at least the family's floor window.")
	UserUsedMax   = perUser("slot_user_used_max", "A user's maximum used over sampling.window.")
	UserFloor     = perUser("slot_user_floor_seconds", "Seconds since the user's used was last observed at its baseline (0 if it is there now).")
	Acquires      = domain("slot_acquires_total", Counter, "Members (or lock tokens) seen for the first time.")
	HoldsEnded    = domain("slot_holds_ended_total", Counter, "Members gone, by outcome: released (before their expiry), expired (after it: the holder died and the TTL cleaned up), lost (the data vanished: restart, flush, failover to an empty replica).", "outcome")
	HoldDuration  = domain("slot_hold_duration_seconds", HistogramType, "First-seen to last-seen of ended holds.")
	Heartbeats    = domain("slot_heartbeats_total", Counter, "Heartbeats inferred from score advances.")
	WithoutTTL    = domain("slot_sets_without_ttl", Gauge, "Slot-set or lock keys with no expiry (PTTL -1): they never evaporate.")
	ExpiringEarly = domain("slot_sets_expiring_early", Gauge, "Slot-set keys whose own expiry comes before their latest unexpired member's by more than clock_skew_tolerance.")
	CountersNeg   = domain("slot_counters_negative", Gauge, "Counter keys below 0 (DECR without INCR).")

	RateNoTTL        = domain("slot_ratelimit_keys_without_ttl", Gauge, "Rate-limit keys with no expiry: INCR then a crash before EXPIRE; the window never ends.")
	RateTTLBeyond    = domain("slot_ratelimit_keys_ttl_beyond_window", Gauge, "Rate-limit keys whose PTTL exceeds the window: the expiry is refreshed on every hit, or set in the wrong unit.")
	RateLockedOut    = domain("slot_ratelimit_callers_locked_out", Gauge, "Callers at or over the limit whose counter will not restart by itself: no TTL, or not restarted for longer than 2 x window.")
	QueueItems       = domain("slot_queue_items", Gauge, "Elements in all queues (lists) of the family.")
	QueuesStalled    = domain("slot_queues_stalled", Gauge, "Non-empty queues whose next element has been next for longer than max_wait.")
	QueueHeadWait    = perUser("slot_queue_head_wait_seconds", "How long the next element of this queue has been next.")
	StreamEntries    = domain("slot_stream_entries", Gauge, "Entries (XLEN) over all streams of the family.")
	StreamPending    = domain("slot_stream_pending", Gauge, "Entries delivered and not acked, over all groups.")
	StreamLag        = domain("slot_stream_lag", Gauge, "Entries not yet delivered to their group (XINFO GROUPS lag), over the groups that report it.")
	StreamStuck      = domain("slot_stream_pending_stuck", Gauge, "Pending entries idle for longer than max_hold: a consumer died mid-job.")
	StreamDead       = domain("slot_stream_consumers_dead", Gauge, "Consumers with pending entries, idle for longer than max_hold.")
	StreamRedeliver  = domain("slot_stream_redelivered", Gauge, "Pending entries delivered more than max_deliveries times: poison jobs.")
	StreamOldest     = perUser("slot_stream_oldest_pending_seconds", "Age of the oldest pending entry of a group, from its ID's time.", "group")
	Jobs             = domain("slot_jobs", Gauge, "Jobs of a queue framework's family by state: waiting, active (owner alive), orphaned (started, owner gone), stuck (active longer than max_hold with its lock still renewed), scheduled, overdue (scheduled and due more than max_wait ago).", "state")
	JobsOldest       = domain("slot_jobs_oldest_seconds", Gauge, "Age of the oldest job waiting (the queue's latency) and of the oldest orphaned job; 0 when there is none.", "state")
	Workers          = domain("slot_workers", Gauge, "Registered workers of a queue framework that registers them (sidekiq, rq): live, or dead (heartbeat gone).", "state")
	JobsLost         = domain("slot_jobs_lost_total", Counter, "Started jobs that vanished with their dead owner, never finished, failed or requeued.")
	QueueJobs        = &Metric{Name: "slot_queue_jobs", Help: "Jobs of one queue by state, as slot_jobs. Capped to leaks.per_user_series queues per family, anomalies first." + sampled, Type: Gauge, PerUser: true, UserLabel: "queue", Labels: []string{"state"}}
	FamilyInfo       = &Metric{Name: "slot_family_info", Help: "1 per family, with its kind.", Type: Gauge, Labels: []string{"kind"}}
	FamilyLimit      = &Metric{Name: "slot_family_limit", Help: "The family's limit (absent where it has none).", Type: Gauge}
	FamilyMaxWait    = &Metric{Name: "slot_family_max_wait_seconds", Help: "The family's max_wait (list and queue-framework families): the longest a job may wait; alerts compare waiting ages with it.", Type: Gauge}
	FamilyFloorLimit = &Metric{Name: "slot_family_floor_window_seconds", Help: "The family's floor threshold (0: the floor alert is off for it); alerts compare floors with it.", Type: Gauge}
	// SamplingPeriod is the exporter's own: published with every sweep
	// attempt, fresh or not (the collector emits it before judging
	// freshness), since the stale-sweep alert compares against it.
	SamplingPeriod = &Metric{Name: "slot_exporter_sampling_period_seconds", Help: "Time between the starts of the last two successful sweeps of a family: how old, at most, the readings behind its figures are. sampling.interval when the read budget (sampling.redis_cpu_share, max_keys_per_second) covers every key that changed; longer when it does not.", Type: Gauge}
)

// Domain lists every domain metric, for the collector's Describe.
var Domain = []*Metric{
	Sets, Members, UsersActive, UsersAtLimit, UsersOver, UsersFloor, UserUsedMax, UserFloor,
	Acquires, HoldsEnded, HoldDuration, Heartbeats, WithoutTTL, ExpiringEarly, CountersNeg,
	RateNoTTL, RateTTLBeyond, RateLockedOut, QueueItems, QueuesStalled, QueueHeadWait,
	StreamEntries, StreamPending, StreamLag, StreamStuck, StreamDead, StreamRedeliver, StreamOldest,
	Jobs, JobsOldest, Workers, JobsLost, QueueJobs,
	FamilyInfo, FamilyLimit, FamilyFloorLimit, FamilyMaxWait, SamplingPeriod,
}
