package release

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/members.lua
	membersSrc string
	//go:embed scripts/lock.lua
	lockSrc string
	//go:embed scripts/value.lua
	valueSrc string

	membersScript = redis.NewScript(membersSrc)
	lockScript    = redis.NewScript(lockSrc)
	valueScript   = redis.NewScript(valueSrc)
)

// pairsPerCall bounds one run of the members script: it blocks Redis
// while it runs.
const pairsPerCall = 500

func releaseMembers(ctx context.Context, c redis.Cmdable, k *PlanKey, o *Outcome) error {
	for start := 0; start < len(k.Remove); start += pairsPerCall {
		batch := k.Remove[start:min(start+pairsPerCall, len(k.Remove))]
		args := make([]any, 0, 2*len(batch))
		for _, m := range batch {
			args = append(args, m.Member, FormatScore(m.Score))
		}
		res, err := membersScript.Run(ctx, c, []string{k.Key}, args...).Slice()
		if err != nil {
			items := make([]Item, len(batch))
			for i := range batch {
				items[i] = memberItem(k.Key, &batch[i])
			}
			return o.unanswered(err, items...)
		}
		if len(res) != 2*len(batch) {
			return fmt.Errorf("the members script answered %d values for %d members", len(res), len(batch))
		}
		for i, m := range batch {
			code, _ := res[2*i].(int64)
			now, _ := res[2*i+1].(string)
			it := memberItem(k.Key, &m)
			switch code {
			case 1:
				it.Outcome = Removed
				o.Removed++
			case 0:
				it.Outcome, it.Now = KeptMoved, now
				o.Kept++
			default:
				it.Outcome = Gone
				o.Gone++
			}
			o.Items = append(o.Items, it)
		}
	}
	return nil
}

func releaseLock(ctx context.Context, c redis.Cmdable, k *PlanKey, o *Outcome) error {
	for _, m := range k.Remove {
		res, err := lockScript.Run(ctx, c, []string{k.Key}, m.Member).Slice()
		if err != nil {
			return o.unanswered(err, memberItem(k.Key, &m))
		}
		o.settle(memberItem(k.Key, &m), res, Removed)
	}
	return nil
}

func setValue(ctx context.Context, c redis.Cmdable, k *PlanKey, v int64, o *Outcome) error {
	nv := strconv.FormatInt(v, 10)
	res, err := valueScript.Run(ctx, c, []string{k.Key}, k.Value, nv).Slice()
	if err != nil {
		return o.unanswered(err, Item{Key: k.Key, Value: k.Value, NewValue: nv})
	}
	o.settle(Item{Key: k.Key, Value: k.Value, NewValue: nv}, res, Set)
	return nil
}

// settle records the answer of a compare-and-write script (lock.lua,
// value.lua): {1, previous} when it wrote (outcome done); {0, current}
// when the key holds something else now, which is left alone; {0, ""}
// when the key is gone.
func (o *Outcome) settle(it Item, res []any, done string) {
	var code int64
	var now string
	if len(res) > 0 {
		code, _ = res[0].(int64)
	}
	if len(res) > 1 {
		now, _ = res[1].(string)
	}
	switch {
	case code == 1:
		it.Outcome = done
		o.Removed++
	case now == "":
		it.Outcome = Gone
		o.Gone++
	default:
		it.Outcome, it.Now = Changed, now
		o.Kept++
	}
	o.Items = append(o.Items, it)
}
