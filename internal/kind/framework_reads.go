package kind

import (
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/redisread"
)

// What the framework layouts share in reading: judging the error of one
// of the many keys a queue is read from.

// partJudge judges an error from reading one part (a job hash, a lock, a
// queue's list) of discovery key r's queues: ok when there is a value to
// use. A missing part (redis.Nil) is not ok and no error; one of the
// wrong type (or otherwise unusable for this key alone) is bad data,
// recorded in fr; a part on another cluster node (MOVED) marks the whole
// discovery key Missed, so that what it held is carried; anything else
// (the connection, the server) is returned and fails the sweep.
func partJudge(r *redisread.KeyRead, fr *FrameworkRead, key string, err error) (ok bool, fatal error) {
	if err == nil {
		return true, nil
	}
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	part := redisread.KeyRead{Key: key}
	if err := part.Judge(err); err != nil {
		return false, err
	}
	switch part.Status {
	case redisread.Missed:
		r.Status = redisread.Missed
	case redisread.Skipped:
		fr.Bad = append(fr.Bad, BadData{Key: key, Reason: part.Skip, Detail: err.Error()})
	}
	return false, nil
}

// firstErr is the first error of the commands that read one key, which
// partJudge judges once: a key of the wrong type is one bad key, however
// many commands found it so.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// hashInt is a job hash field as an integer; -1 when absent or not a
// number.
func hashInt(v any) int64 {
	s, ok := v.(string)
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Some frameworks write floats (a JSON number).
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return -1
		}
		return int64(f)
	}
	return n
}

func hashStr(v any) string {
	s, _ := v.(string)
	return s
}
