package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// kindFields are the fields each kind takes beyond name, kind, match, user,
// limit and floor_window; any other is an error that names the kind.
var kindFields = map[Kind][]string{
	KindSlotSet:   {"ttl", "heartbeat_interval", "max_hold", "stale_after", "clock_skew_tolerance", "score_unit", "score"},
	KindCounter:   {},
	KindRateLimit: {"window"},
	KindLock:      {"ttl", "max_hold", "clock_skew_tolerance"},
	KindList:      {"max_wait", "pop_side"},
	KindStream:    {"max_hold", "max_deliveries"},
	KindBullMQ:    {"prefix", "queues", "max_wait", "max_hold"},
	KindSidekiq:   {"prefix", "queues", "max_wait", "max_hold"},
	KindRQ:        {"prefix", "queues", "max_wait", "max_hold"},
	KindCelery:    {"queues", "max_wait", "visibility_timeout"},
}

// kindSpecific lists every kind-specific field, in the order they are
// checked.
var kindSpecific = []string{"ttl", "heartbeat_interval", "max_hold", "stale_after", "clock_skew_tolerance", "score_unit", "score", "window", "max_wait", "pop_side", "max_deliveries", "prefix", "queues", "visibility_timeout"}

func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func validateFamily(f *Family, path string, set present) (*regexp.Regexp, error) {
	switch {
	case f.Name == "":
		return nil, fmt.Errorf("%s.name: required", path)
	case !validName.MatchString(f.Name):
		return nil, fmt.Errorf("%s.name: invalid name %q (want letters, digits, _, - and . only)", path, f.Name)
	}

	allowed, known := kindFields[f.Kind]
	switch {
	case f.Kind == "":
		return nil, fmt.Errorf("%s.kind: required (%s)", path, kindList())
	case !known:
		return nil, fmt.Errorf("%s.kind: unknown kind %q (want %s)", path, f.Kind, kindList())
	}
	if f.Kind.Framework() {
		return validateFramework(f, path, set, allowed)
	}

	if f.Match == "" {
		return nil, fmt.Errorf("%s.match: required", path)
	}
	src, hasStar, err := GlobToRegexp(f.Match)
	if err != nil {
		return nil, fmt.Errorf("%s.match: %v", path, err)
	}
	var re *regexp.Regexp
	if f.User == "" {
		if !hasStar {
			return nil, fmt.Errorf("%s.match: must contain a * (what it matches is the user) unless user is set", path)
		}
		if re, err = regexp.Compile(src); err != nil {
			return nil, fmt.Errorf("%s.match: %s", path, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	} else {
		if re, err = regexp.Compile(f.User); err != nil {
			return nil, fmt.Errorf("%s.user: invalid regexp: %s", path, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
		if re.NumSubexp() < 1 {
			return nil, fmt.Errorf("%s.user: has no capture group (its first group is the user)", path)
		}
	}

	limitRequired := f.Kind == KindSlotSet || f.Kind == KindCounter
	switch {
	case !set["limit"] && limitRequired:
		return nil, fmt.Errorf("%s.limit: required for kind %s", path, f.Kind)
	case set["limit"] && f.Limit < 1:
		return nil, fmt.Errorf("%s.limit: must be >= 1", path)
	}
	for _, name := range kindSpecific {
		if set[name] && !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("%s.%s: not used by kind %s", path, name, f.Kind)
		}
	}

	switch f.Kind {
	case KindCounter:
		return re, nil
	case KindRateLimit:
		switch {
		case !set["window"]:
			return nil, fmt.Errorf("%s.window: required for kind ratelimit (the fixed window the key's TTL is set to)", path)
		case f.Window <= 0:
			return nil, fmt.Errorf("%s.window: must be > 0", path)
		}
		return re, nil
	case KindLock:
		switch {
		case !set["ttl"]:
			return nil, fmt.Errorf("%s.ttl: required for kind lock (the lease the holder sets with PX)", path)
		case f.TTL <= 0:
			return nil, fmt.Errorf("%s.ttl: must be > 0", path)
		case !set["max_hold"]:
			return nil, fmt.Errorf("%s.max_hold: required for kind lock", path)
		case f.MaxHold <= f.TTL:
			return nil, fmt.Errorf("%s.max_hold: must be longer than ttl", path)
		case f.ClockSkewTolerance < 0:
			return nil, fmt.Errorf("%s.clock_skew_tolerance: must be >= 0", path)
		}
		return re, nil
	case KindList:
		switch {
		case !set["max_wait"]:
			return nil, fmt.Errorf("%s.max_wait: required for kind list (how long an element may stay next before the queue counts as stalled)", path)
		case f.MaxWait <= 0:
			return nil, fmt.Errorf("%s.max_wait: must be > 0", path)
		}
		switch f.PopSide {
		case PopRight, PopLeft:
		default:
			return nil, fmt.Errorf("%s.pop_side: unknown side %q (want right or left)", path, f.PopSide)
		}
		return re, nil
	case KindStream:
		switch {
		case !set["max_hold"]:
			return nil, fmt.Errorf("%s.max_hold: required for kind stream (how long an entry may stay pending)", path)
		case f.MaxHold <= 0:
			return nil, fmt.Errorf("%s.max_hold: must be > 0", path)
		case f.MaxDeliveries < 1:
			return nil, fmt.Errorf("%s.max_deliveries: must be >= 1", path)
		}
		return re, nil
	}

	switch {
	case !set["ttl"]:
		return nil, fmt.Errorf("%s.ttl: required for kind slotset", path)
	case f.TTL <= 0:
		return nil, fmt.Errorf("%s.ttl: must be > 0", path)
	case !set["heartbeat_interval"]:
		return nil, fmt.Errorf("%s.heartbeat_interval: required for kind slotset", path)
	case f.HeartbeatInterval <= 0:
		return nil, fmt.Errorf("%s.heartbeat_interval: must be > 0", path)
	case f.HeartbeatInterval >= f.TTL:
		return nil, fmt.Errorf("%s.heartbeat_interval: must be shorter than ttl", path)
	case !set["max_hold"]:
		return nil, fmt.Errorf("%s.max_hold: required for kind slotset", path)
	case f.MaxHold <= f.TTL:
		return nil, fmt.Errorf("%s.max_hold: must be longer than ttl", path)
	case f.StaleAfter <= f.HeartbeatInterval:
		return nil, fmt.Errorf("%s.stale_after: must be longer than heartbeat_interval", path)
	case f.StaleAfter >= f.TTL && !set["stale_after"]:
		return nil, fmt.Errorf("%s.stale_after: the default, 2 x heartbeat_interval (%v), is not shorter than ttl; set stale_after between heartbeat_interval and ttl", path, f.StaleAfter)
	case f.StaleAfter >= f.TTL:
		return nil, fmt.Errorf("%s.stale_after: must be shorter than ttl (a member expires before it could be stale)", path)
	case f.ClockSkewTolerance < 0:
		return nil, fmt.Errorf("%s.clock_skew_tolerance: must be >= 0", path)
	}
	switch f.ScoreUnit {
	case ScoreUnitMillis, ScoreUnitSeconds:
	default:
		return nil, fmt.Errorf("%s.score_unit: unknown unit %q (want ms or s)", path, f.ScoreUnit)
	}
	switch f.Score {
	case ScoreExpiry, ScoreHeartbeat:
	default:
		return nil, fmt.Errorf("%s.score: unknown score mode %q (want expiry or heartbeat)", path, f.Score)
	}
	return re, nil
}
