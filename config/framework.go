package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Queue frameworks (bullmq, sidekiq, rq, celery) read a layout the
// framework writes, not one key per user: the queue is their unit and
// stands where a user stands. They take no match or user: the keys that
// discover their queues follow from the kind and its prefix (Discovery),
// and the sweep finds them as it finds any family's keys.

// Framework reports whether k is a queue framework's kind.
func (k Kind) Framework() bool {
	switch k {
	case KindBullMQ, KindSidekiq, KindRQ, KindCelery:
		return true
	}
	return false
}

// Defaults of the queue frameworks.
const (
	DefaultBullMQPrefix      = "bull"
	DefaultRQPrefix          = "rq"
	DefaultFrameworkMaxWait  = 5 * time.Minute
	DefaultFrameworkMaxHold  = time.Hour
	DefaultVisibilityTimeout = time.Hour // kombu's own default
)

// discovery is, per framework, the SCAN pattern of the keys that name its
// queues, and the regexp whose first group is what the sweep takes as the
// key's user (the queue, where the key is per queue), for a prefix.
var discovery = map[Kind]func(prefix string) (match, user string){
	// Every BullMQ (5-6) and Bull (3-4) queue that ever held a job has
	// its job-id counter, <prefix>:<queue>:id, INCRed by each add;
	// nothing but the queue's obliteration deletes it.
	KindBullMQ: func(p string) (string, string) {
		return p + ":*:id", "^" + regexp.QuoteMeta(p+":") + "(.+):id$"
	},
	// Sidekiq lists its queues in one set, <namespace:>queues.
	KindSidekiq: func(p string) (string, string) {
		k := joinPrefix(p, "queues")
		return k, "^(" + regexp.QuoteMeta(k) + ")$"
	},
	// RQ lists its queues in one set, rq:queues.
	KindRQ: func(p string) (string, string) {
		k := p + ":queues"
		return k, "^(" + regexp.QuoteMeta(k) + ")$"
	},
	// kombu's Redis transport binds each queue to its exchange in a set,
	// _kombu.binding.<exchange>, whose members name the queue.
	KindCelery: func(string) (string, string) {
		return "_kombu.binding.*", `^_kombu\.binding\.(.+)$`
	},
}

func joinPrefix(p, k string) string {
	if p == "" {
		return k
	}
	return p + ":" + k
}

// frameworkDefaults fills in a framework family's defaults and its
// discovery pattern.
func frameworkDefaults(f *Family, set present) {
	if !set["prefix"] {
		switch f.Kind {
		case KindBullMQ:
			f.Prefix = DefaultBullMQPrefix
		case KindRQ:
			f.Prefix = DefaultRQPrefix
		}
	}
	if !set["max_wait"] {
		f.MaxWait = DefaultFrameworkMaxWait
	}
	if !set["max_hold"] && f.Kind != KindCelery {
		f.MaxHold = DefaultFrameworkMaxHold
	}
	if !set["visibility_timeout"] && f.Kind == KindCelery {
		f.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if !set["match"] && !set["user"] {
		f.Match, f.User = discovery[f.Kind](f.Prefix)
	}
}

// validateFramework checks what a framework family takes beyond its name
// and kind, and returns the regexp that names each discovery key's queue.
func validateFramework(f *Family, path string, set present, allowed []string) (*regexp.Regexp, error) {
	for _, name := range []string{"match", "user", "limit"} {
		if set[name] {
			return nil, fmt.Errorf("%s.%s: not used by kind %s (the queue is its unit: its queues are found under prefix)", path, name, f.Kind)
		}
	}
	for _, name := range kindSpecific {
		if set[name] && !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("%s.%s: not used by kind %s", path, name, f.Kind)
		}
	}
	switch {
	case f.Prefix == "" && (f.Kind == KindBullMQ || f.Kind == KindRQ):
		return nil, fmt.Errorf("%s.prefix: must not be empty", path)
	case strings.ContainsAny(f.Prefix, `*?[]\`):
		return nil, fmt.Errorf("%s.prefix: %q holds a SCAN pattern character (*, ?, [, ] or \\)", path, f.Prefix)
	case f.MaxWait <= 0:
		return nil, fmt.Errorf("%s.max_wait: must be > 0", path)
	case f.Kind != KindCelery && f.MaxHold <= 0:
		return nil, fmt.Errorf("%s.max_hold: must be > 0", path)
	case f.Kind == KindCelery && f.VisibilityTimeout <= 0:
		return nil, fmt.Errorf("%s.visibility_timeout: must be > 0", path)
	}
	seen := map[string]int{}
	for i, q := range f.Queues {
		if q == "" {
			return nil, fmt.Errorf("%s.queues[%d]: must not be empty", path, i)
		}
		if j, dup := seen[q]; dup {
			return nil, fmt.Errorf("%s.queues[%d]: duplicate queue %q (also queues[%d])", path, i, q, j)
		}
		seen[q] = i
	}
	match, user := discovery[f.Kind](f.Prefix)
	if f.Match != match || f.User != user {
		// A family built in code without frameworkDefaults.
		return nil, fmt.Errorf("%s.match: must be %q for kind %s with prefix %q", path, match, f.Kind, f.Prefix)
	}
	return regexp.MustCompile(user), nil
}

// Watches reports whether a framework family watches queue q: every queue
// without a queues list.
func (f Family) Watches(q string) bool {
	return len(f.Queues) == 0 || slices.Contains(f.Queues, q)
}
