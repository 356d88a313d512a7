package main

import (
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slotexporter/slot_exporter/simulator"
)

// recipeFlags declares the flags of the other recipes' workloads. Zero
// durations and empty prefixes take the simulator's defaults.
func (c *config) recipeFlags(app *kingpin.Application) {
	c.countSet = map[*int]*bool{}
	count := func(name, help string, target *int) {
		set := new(bool)
		c.countSet[target] = set
		app.Flag(name, help).Default("0").IsSetByUser(set).IntVar(target)
	}

	r := &c.o.RateLimits
	app.Flag("ratelimit.prefix", "Rate counter key prefix: <prefix>{<user>} (default "+simulator.DefaultRatePrefix+").").StringVar(&r.Prefix)
	app.Flag("ratelimit.limit", "Hits allowed per window (0: 10).").Int64Var(&r.Limit)
	app.Flag("ratelimit.window", "Rate-limit window (0: 10s).").DurationVar(&r.Window)
	app.Flag("ratelimit.hit-interval", "Time between two hits of one caller (0: window / (2 x limit)).").DurationVar(&r.HitInterval)
	count("ratelimit.healthy", "Rate-limit callers using the one-script recipe.", &r.Healthy)
	count("ratelimit.no-expire", "Callers that INCR and crash before the first EXPIRE: counter without TTL.", &r.NoExpire)
	count("ratelimit.expire-every-hit", "Callers that PEXPIRE on every hit: the window never ends.", &r.ExpireEveryHit)
	count("ratelimit.seconds-as-millis", "Callers whose window is given in seconds as milliseconds (1000x too short).", &r.SecondsAsMillis)
	count("ratelimit.millis-as-seconds", "Callers whose window is given in milliseconds as seconds (1000x too long).", &r.MillisAsSeconds)

	l := &c.o.Locks
	app.Flag("lock.prefix", "Lock key prefix: <prefix>{<user>} (default "+simulator.DefaultLockPrefix+").").StringVar(&l.Prefix)
	app.Flag("lock.ttl", "Lock lease (0: 10s).").DurationVar(&l.TTL)
	app.Flag("lock.hold", "Mean hold (0: the lease).").DurationVar(&l.Hold)
	app.Flag("lock.idle", "Mean time between holds (0: half the hold).").DurationVar(&l.Idle)
	app.Flag("lock.max-hold", "The exporter's max_hold, for the truth's zombie count (0: 10 x ttl).").DurationVar(&l.MaxHold)
	app.Flag("lock.clock-skew-tolerance", "The exporter's clock_skew_tolerance, for the truth's future count (0: 5s).").DurationVar(&l.ClockSkewTolerance)
	count("lock.healthy", "Lock holders using the recipe (SET NX PX, token-checked extend and release).", &l.Healthy)
	count("lock.no-ttl", "Holders that SET NX without PX and crash: locked forever.", &l.NoTTL)
	count("lock.zombie", "Holders stuck renewing their lease forever.", &l.Zombie)
	count("lock.wrong-unit", "Holders whose lease is given in milliseconds as seconds (1000x too long).", &l.WrongUnit)
	count("lock.killed", "Holders killed mid-lease, again and again: leases run out.", &l.Killed)

	q := &c.o.ListQueues
	app.Flag("list.prefix", "Queue key prefix: <prefix>{<user>}, processing list <prefix>{<user>}:processing (default "+simulator.DefaultListPrefix+").").StringVar(&q.Prefix)
	app.Flag("list.push-interval", "Time between two jobs pushed to one queue (0: 1s).").DurationVar(&q.PushInterval)
	app.Flag("list.process", "Mean time a worker spends on a job (0: half the push interval).").DurationVar(&q.Process)
	app.Flag("list.restart-delay", "How long a killed worker stays down (0: 1s).").DurationVar(&q.RestartDelay)
	app.Flag("list.max-wait", "The exporter's max_wait, for the truth's stalled counts (0: 1m).").DurationVar(&q.MaxWait)
	count("list.healthy", "Queues with a worker (BLMOVE into a processing list, LREM on completion).", &q.Healthy)
	count("list.no-consumer", "Queues nobody consumes: they stall.", &q.NoConsumer)
	count("list.killed-worker", "Queues whose worker is killed holding a job: it stays in the processing list.", &q.KilledWorker)

	st := &c.o.StreamQueues
	app.Flag("stream.prefix", "Stream key prefix: <prefix>{<user>} (default "+simulator.DefaultStreamPrefix+").").StringVar(&st.Prefix)
	app.Flag("stream.group", "Consumer group (default "+simulator.DefaultStreamGroup+").").StringVar(&st.Group)
	app.Flag("stream.add-interval", "Time between two entries of one stream (0: 1s).").DurationVar(&st.AddInterval)
	app.Flag("stream.process", "Mean time a consumer spends on an entry (0: half the add interval).").DurationVar(&st.Process)
	app.Flag("stream.min-idle", "XAUTOCLAIM min idle time of the claim loop (0: 2s).").DurationVar(&st.MinIdle)
	app.Flag("stream.restart-delay", "How long a consumer killed by a poison entry stays down (0: 1s).").DurationVar(&st.RestartDelay)
	app.Flag("stream.max-hold", "The exporter's max_hold, for the truth's stuck and dead counts (0: 1m).").DurationVar(&st.MaxHold)
	app.Flag("stream.max-deliveries", "The exporter's max_deliveries, for the truth's redelivered count (0: 5).").Int64Var(&st.MaxDeliveries)
	count("stream.healthy", "Streams whose consumer reads, acks and runs the claim loop.", &st.Healthy)
	count("stream.dead-consumer", "Streams with a consumer killed holding a pending entry, and no claim loop.", &st.DeadConsumer)
	count("stream.poison", "Streams with an entry that kills every consumer that takes it.", &st.Poison)
	count("stream.lagging", "Streams whose group falls behind.", &st.Lagging)
}

// presetRecipes is the recipes scenario: every kind, healthy and with each
// of its failures, for the counts not given on the command line.
func (c *config) presetRecipes() {
	r, l, q, st := &c.o.RateLimits, &c.o.Locks, &c.o.ListQueues, &c.o.StreamQueues
	for target, n := range map[*int]int{
		&r.Healthy: 5, &r.NoExpire: 1, &r.ExpireEveryHit: 1, &r.SecondsAsMillis: 1, &r.MillisAsSeconds: 1,
		&l.Healthy: 5, &l.NoTTL: 1, &l.Zombie: 1, &l.WrongUnit: 1, &l.Killed: 1,
		&q.Healthy: 3, &q.NoConsumer: 1, &q.KilledWorker: 1,
		&st.Healthy: 3, &st.DeadConsumer: 1, &st.Poison: 1, &st.Lagging: 1,
	} {
		if !*c.countSet[target] {
			*target = n
		}
	}
}

// logRecipes logs the other recipes' truth in one line each.
func logRecipes(logger *slog.Logger, t simulator.Truth) {
	if r := t.RateLimits; r != nil {
		logger.Info("rate limits", "hits", r.Hits, "refused", r.Refused, "keys", r.Keys, "without_ttl", r.KeysWithoutTTL,
			"ttl_beyond_window", r.KeysTTLBeyondWindow, "at_limit", r.CallersAtLimit, "locked_out", r.CallersLockedOut)
	}
	if l := t.Locks; l != nil {
		logger.Info("locks", "acquires", l.Acquires, "released", l.Released, "expired", l.Expired, "held", l.Held,
			"zombie", l.Zombie, "future", l.Future, "without_ttl", l.WithoutTTL)
	}
	if q := t.ListQueues; q != nil {
		logger.Info("list queues", "pushed", q.Pushed, "completed", q.Completed, "items", q.Items, "processing_items", q.ProcessingItems,
			"stalled", q.Stalled, "processing_stalled", q.ProcessingStalled, "orphaned", q.Orphaned)
	}
	if s := t.StreamQueues; s != nil {
		logger.Info("stream queues", "added", s.Added, "acked", s.Acked, "pending", s.Pending, "lag", s.Lag,
			"stuck", s.PendingStuck, "dead_consumers", s.ConsumersDead, "redelivered", s.Redelivered)
	}
}
