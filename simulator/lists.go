package simulator

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/slotexporter/slot_exporter/recipe/listqueue"
)

// List queue modes, besides ModeHealthy.
const (
	// ListNoConsumer: a producer and no consumer; the queue stalls and grows.
	ListNoConsumer = "no_consumer"
	// ListKilledWorker: the queue's worker is killed holding the first job
	// it takes, comes back after RestartDelay and carries on. No reaper
	// runs: the job stays in the processing list for ever, its oldest
	// element.
	ListKilledWorker = "killed_worker"
)

// List queue workload defaults.
const (
	DefaultListPrefix       = "queue:mail:"
	DefaultListPushInterval = time.Second
	DefaultListMaxWait      = time.Minute
	DefaultRestartDelay     = time.Second
	// listMaxItems bounds a queue nobody consumes: its producer stops there.
	listMaxItems = 100000
	// recipeBlock is the blocking timeout of takes and reads: a Pause waits
	// at most this long for them.
	recipeBlock = 100 * time.Millisecond
)

// ListQueueWorkload drives reliable list queues (package recipe/listqueue):
// one queue per user, Prefix+"{"+user+"}", with its processing list
// Prefix+"{"+user+"}:processing", a producer pushing a job every
// PushInterval and, unless the mode says otherwise, one worker taking jobs
// with BLMOVE and completing them with LREM. The counts say how many queues
// run in each mode; all zero (the default) turns the workload off.
type ListQueueWorkload struct {
	// Prefix prefixes the queues (default "queue:mail:").
	Prefix string
	// PushInterval is the time between two pushes to one queue (default 1s).
	PushInterval time.Duration
	// Process is the mean time a worker spends on a job; each takes
	// uniformly 50%..150% of it (default PushInterval/2).
	Process time.Duration
	// LeaseTTL is the recipe's job lease (default 30s). No reaper runs.
	LeaseTTL time.Duration
	// RestartDelay is how long a killed worker stays down (default 1s).
	RestartDelay time.Duration
	// MaxWait is the exporter's, used to count stalled lists in the truth
	// (default 1m). It must exceed 1.5 × Process: a healthy queue never
	// stalls.
	MaxWait time.Duration

	Healthy      int // queues with a healthy worker
	NoConsumer   int // ListNoConsumer queues
	KilledWorker int // ListKilledWorker queues
}

func (w *ListQueueWorkload) validate(users int) error {
	total, err := checkCounts("ListQueues", users, map[string]int{
		"Healthy": w.Healthy, "NoConsumer": w.NoConsumer, "KilledWorker": w.KilledWorker,
	})
	if err != nil {
		return err
	}
	if err := checkDurations("ListQueues", map[string]time.Duration{
		"PushInterval": w.PushInterval, "Process": w.Process, "LeaseTTL": w.LeaseTTL,
		"RestartDelay": w.RestartDelay, "MaxWait": w.MaxWait,
	}); err != nil {
		return err
	}
	if total == 0 {
		return nil
	}
	w.Prefix = orDefault(w.Prefix, DefaultListPrefix)
	w.PushInterval = orDefault(w.PushInterval, DefaultListPushInterval)
	w.Process = orDefault(w.Process, w.PushInterval/2)
	w.LeaseTTL = orDefault(w.LeaseTTL, listqueue.DefaultLeaseTTL)
	w.RestartDelay = orDefault(w.RestartDelay, DefaultRestartDelay)
	w.MaxWait = orDefault(w.MaxWait, DefaultListMaxWait)
	if w.LeaseTTL < time.Millisecond {
		return errorf("ListQueues.LeaseTTL %v must be at least 1ms", w.LeaseTTL)
	}
	if w.MaxWait <= w.Process*3/2 {
		return errorf("ListQueues.MaxWait %v must exceed 1.5 × ListQueues.Process %v", w.MaxWait, w.Process)
	}
	return nil
}

// ListQueueTruth is the list queue workload's ground truth. Gauges describe
// the queues and processing lists in Redis at Truth.At. A list's head is its
// pop-side element (RIGHT): for a queue the next job, for a processing list
// its oldest job; its wait is the time since that element became the head.
// A list is stalled when it is not empty and its head has waited longer
// than MaxWait.
type ListQueueTruth struct {
	MaxWaitSeconds float64 `json:"max_wait_seconds"`
	// Users maps each queue's user to its mode.
	Users map[string]string `json:"users"`

	Pushed    int64 `json:"pushed"`    // jobs pushed
	Taken     int64 `json:"taken"`     // jobs moved into a processing list
	Completed int64 `json:"completed"` // jobs removed from a processing list

	Items             int64 `json:"items"`              // elements in all queues
	ProcessingItems   int64 `json:"processing_items"`   // elements in all processing lists
	Stalled           int64 `json:"stalled"`            // stalled queues
	ProcessingStalled int64 `json:"processing_stalled"` // stalled processing lists
	// Orphaned counts jobs in processing lists whose worker was killed.
	Orphaned int64 `json:"orphaned"`

	// By user of a non-empty list: its length, and its head's wait.
	Used                      map[string]int64   `json:"used"`
	ProcessingUsed            map[string]int64   `json:"processing_used"`
	HeadWaitSeconds           map[string]float64 `json:"head_wait_seconds"`
	ProcessingHeadWaitSeconds map[string]float64 `json:"processing_head_wait_seconds"`
	// By user of a stalled list: its length.
	StalledUsers           map[string]int64 `json:"stalled_users"`
	ProcessingStalledUsers map[string]int64 `json:"processing_stalled_users"`
}

type listWorkload struct {
	s *Sim
	o ListQueueWorkload

	mu        sync.Mutex
	queues    []*listQueue
	pushed    int64
	taken     int64
	completed int64
	errors    int64
}

type listQueue struct {
	user, mode string
	q          *listqueue.Queue
	rng        *rand.Rand
	ready      chan struct{} // closed once the producer has reset the keys

	// Guarded by listWorkload.mu. Both lists are kept oldest first: [0] is
	// the pop side.
	items         []string
	headSince     time.Time
	processing    []string
	procHeadSince time.Time
	orphan        string // the job a killed worker left behind
}

func newListWorkload(s *Sim) *listWorkload {
	o := s.o.ListQueues
	modes := modeList(map[string]int{
		ModeHealthy: o.Healthy, ListNoConsumer: o.NoConsumer, ListKilledWorker: o.KilledWorker,
	}, []string{ModeHealthy, ListNoConsumer, ListKilledWorker})
	if len(modes) == 0 {
		return nil
	}
	w := &listWorkload{s: s, o: o}
	users := s.pickUsers(saltListUsers, len(modes))
	for i, mode := range modes {
		// Options were validated: New cannot fail.
		q, _ := listqueue.New(s.c, listqueue.Options{Key: s.QueueKey(users[i]), LeaseTTL: o.LeaseTTL})
		w.queues = append(w.queues, &listQueue{
			user: users[i], mode: mode, q: q, rng: s.actorRng(saltListUsers, i), ready: make(chan struct{}),
		})
	}
	return w
}

// QueueKey returns user's queue ("" when the workload is off); its
// processing list is QueueKey(user) + ":processing".
func (s *Sim) QueueKey(user string) string {
	if s.o.ListQueues.Prefix == "" {
		return ""
	}
	return s.o.ListQueues.Prefix + "{" + user + "}"
}

// ProcessingKey returns the processing list of user's queue ("" when the
// workload is off).
func (s *Sim) ProcessingKey(user string) string {
	if s.o.ListQueues.Prefix == "" {
		return ""
	}
	return s.QueueKey(user) + listqueue.ProcessingSuffix
}

func (w *listWorkload) fill(t *Truth, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lt := &ListQueueTruth{
		MaxWaitSeconds: w.o.MaxWait.Seconds(), Users: map[string]string{},
		Pushed: w.pushed, Taken: w.taken, Completed: w.completed,
		Used: map[string]int64{}, ProcessingUsed: map[string]int64{},
		HeadWaitSeconds: map[string]float64{}, ProcessingHeadWaitSeconds: map[string]float64{},
		StalledUsers: map[string]int64{}, ProcessingStalledUsers: map[string]int64{},
	}
	for _, q := range w.queues {
		lt.Users[q.user] = q.mode
		if q.orphan != "" {
			lt.Orphaned++
		}
		if n := int64(len(q.items)); n > 0 {
			wait := now.Sub(q.headSince)
			lt.Items += n
			lt.Used[q.user] = n
			lt.HeadWaitSeconds[q.user] = wait.Seconds()
			if wait > w.o.MaxWait {
				lt.Stalled++
				lt.StalledUsers[q.user] = n
			}
		}
		if n := int64(len(q.processing)); n > 0 {
			wait := now.Sub(q.procHeadSince)
			lt.ProcessingItems += n
			lt.ProcessingUsed[q.user] = n
			lt.ProcessingHeadWaitSeconds[q.user] = wait.Seconds()
			if wait > w.o.MaxWait {
				lt.ProcessingStalled++
				lt.ProcessingStalledUsers[q.user] = n
			}
		}
	}
	t.ListQueues = lt
	t.Errors += w.errors
}
