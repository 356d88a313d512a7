package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/slotexporter/slot_exporter/alerts/rulescale"
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
	"github.com/slotexporter/slot_exporter/simulator"
)

// Time scale of the test: every time constant of the shipped rules, and the
// exporter's floor window with them, is divided by 60 (30m becomes 30s). No
// range is shorter than two scrape intervals, so rate() always has two
// samples.
const (
	scaleFactor = 1.0 / 60
	scaleMin    = 2 * time.Second
)

// The incident slotsim plays. Streams last 3-9s and 600 users share 8
// arrivals per second, so a healthy user's usage returns to zero within
// seconds and never comes near the 30s floor window. The kill at 6s hits 90%
// of about 40 in-flight holders at once: their slots expire together, and
// over the 5s rate window expiries outnumber releases several times.
// Zombies (4% of streams) and never-DECRed counters (every killed holder's,
// and 2% of the others) keep their users' usage above zero for good.
const (
	killAt    = 6 * time.Second
	ttl       = 2 * time.Second
	heartbeat = 200 * time.Millisecond
)

func slotsimArgs(redisAddr, truthFile string) []string {
	return []string{
		"--redis.addr", redisAddr,
		"--scenario", "incident", "--kill-at", killAt.String(), "--kill-share", "0.9",
		"--users", "600", "--stream-rate", "8", "--stream-duration", "6s",
		"--ttl", ttl.String(), "--heartbeat-interval", heartbeat.String(),
		"--crash-rate", "0", "--zombie-rate", "0.04", "--future-rate", "0.005", "--counter-leak-rate", "0.02",
		"--seed", "1", "--truth-file", truthFile,
		// The other recipes, healthy and broken, so that every row of the
		// dashboards has data. No lock holder is killed: its expired
		// leases would be an expiry spike of their own.
		"--ratelimit.healthy", "5", "--ratelimit.no-expire", "1", "--ratelimit.expire-every-hit", "1", "--ratelimit.millis-as-seconds", "1",
		"--lock.healthy", "3", "--lock.no-ttl", "1", "--lock.zombie", "1", "--lock.wrong-unit", "1",
		"--list.healthy", "3", "--list.no-consumer", "1", "--list.killed-worker", "1",
		"--stream.healthy", "3", "--stream.dead-consumer", "1", "--stream.poison", "1", "--stream.lagging", "1",
	}
}

const (
	slotFamily    = "streams"
	counterFamily = "streams_legacy"
	rateFamily    = "api_rate"
	lockFamily    = "jobs_lock"
	listFamily    = "mail_queue"
	streamFamily  = "events"
)

// recipeFamily watches one of slotsim's other recipes, whose keys are
// <prefix>{<user>} (and, for a queue, <prefix>{<user>}:processing).
func recipeFamily(name, kind, prefix string, extra ...string) redisproc.Family {
	return redisproc.Family{Name: name, Kind: kind, Match: prefix + "*", User: "^" + regexp.QuoteMeta(prefix) + `\{([^}]+)\}`, Extra: extra}
}

// exporterConfig watches slotsim's keys. Its family time constants are
// slotsim's (its defaults, for the other recipes); floor_window is the
// shipped default scaled like the rules.
func exporterConfig(redisAddr string, floorWindow time.Duration) string {
	slots, counters := redisproc.Slots(), redisproc.Counters()
	slots.Name, slots.TTL, slots.Heartbeat, slots.MaxHold = slotFamily, ttl, heartbeat, 20*time.Second
	counters.Name = counterFamily
	rate := recipeFamily(rateFamily, "ratelimit", simulator.DefaultRatePrefix, "window: 10s")
	rate.Limit = 10
	lock := recipeFamily(lockFamily, "lock", simulator.DefaultLockPrefix)
	lock.TTL, lock.MaxHold = 10*time.Second, 100*time.Second
	list := recipeFamily(listFamily, "list", simulator.DefaultListPrefix, "max_wait: 1m")
	stream := recipeFamily(streamFamily, "stream", simulator.DefaultStreamPrefix, "max_hold: 1m", "max_deliveries: 5")
	// The queue frameworks' panels need a family of each shape: a BullMQ
	// queue (writeBullQueue), and an RQ family, whose workers the
	// exporter counts even with none registered.
	bull := redisproc.Family{Name: "bull_jobs", Kind: "bullmq", Extra: []string{"max_wait: 1h", "max_hold: 1h"}}
	rq := redisproc.Family{Name: "rq_jobs", Kind: "rq", Extra: []string{"max_wait: 1h", "max_hold: 1h"}}
	return redisproc.Config{
		Addr:     redisAddr,
		Sampling: []string{"interval: 500ms", "timeout: 5s", "window: 5s"},
		Leaks:    []string{"floor_window: " + floorWindow.String()},
		Families: []redisproc.Family{slots, counters, rate, lock, list, stream, bull, rq},
	}.YAML()
}

// writeBullQueue writes a healthy BullMQ queue as the library lays it out
// (internal/kind/kindtest's layout test has every state): one job running
// under its lock, one waiting.
func writeBullQueue(t *testing.T, c *redis.Client) {
	ctx := context.Background()
	now := exportertest.RedisTime(t, c)
	pipe := c.Pipeline()
	pipe.Set(ctx, "bull:e2e:id", 2, 0)
	pipe.HSet(ctx, "bull:e2e:1", "name", "send", "timestamp", now, "processedOn", now, "attemptsMade", 0)
	pipe.LPush(ctx, "bull:e2e:active", "1")
	pipe.Set(ctx, "bull:e2e:1:lock", "token", time.Hour)
	pipe.HSet(ctx, "bull:e2e:2", "name", "send", "timestamp", now)
	pipe.LPush(ctx, "bull:e2e:wait", "2")
	_, err := pipe.Exec(ctx)
	exportertest.Must(t, err)
}

// prometheusConfig scrapes every second (a minute, scaled) and evaluates
// every half second. The expiry spike is one jump of the expired counter:
// rate() over the scaled 5 s window sees it from the first evaluation after
// the sample that carries it until the sample before it leaves the window,
// about 4 s, and the scaled `for:` needs 2 s of it. Evaluated every second
// that was 4 evaluations where 3 were needed (the diagnostics below show
// it), so one scrape appended late, or missed, on a loaded machine could
// leave the alert pending for good (a loaded run of .ci/run once saw it
// never fire, which this fits); every half second, that costs half a
// second of a margin of about two.
func prometheusConfig(rulesFile, exporterAddr, amAddr string) string {
	return fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 500ms
rule_files:
  - %q
alerting:
  alertmanagers:
    - static_configs:
        - targets: [%q]
scrape_configs:
  - job_name: slot_exporter
    static_configs:
      - targets: [%q]
`, rulesFile, amAddr, exporterAddr)
}

// alertmanagerConfig sends every alert on its own (group_by '...') to the
// test's webhook, after 1s.
func alertmanagerConfig(webhookURL string) string {
	return fmt.Sprintf(`route:
  receiver: webhook
  group_by: ['...']
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: webhook
    webhook_configs:
      - url: %q
        send_resolved: true
`, webhookURL)
}

// gotAlert is one alert of one webhook notification.
type gotAlert struct {
	at       time.Time
	status   string
	labels   map[string]string
	startsAt time.Time
}

// webhook records every alert Alertmanager delivers.
type webhook struct {
	mu     sync.Mutex
	alerts []gotAlert
	errs   []string
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var msg struct {
		Version string `json:"version"`
		Alerts  []struct {
			Status   string            `json:"status"`
			Labels   map[string]string `json:"labels"`
			StartsAt time.Time         `json:"startsAt"`
		} `json:"alerts"`
	}
	err := json.NewDecoder(r.Body).Decode(&msg)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil:
		w.errs = append(w.errs, fmt.Sprintf("undecodable notification: %v", err))
	case msg.Version != "4":
		w.errs = append(w.errs, fmt.Sprintf("notification version %q, want 4", msg.Version))
	}
	for _, a := range msg.Alerts {
		w.alerts = append(w.alerts, gotAlert{at: now, status: a.Status, labels: a.Labels, startsAt: a.StartsAt})
	}
}

func (w *webhook) snapshot() ([]gotAlert, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.alerts), slices.Clone(w.errs)
}

// firing returns the firing alerts named name.
func (w *webhook) firing(name string) []gotAlert {
	all, _ := w.snapshot()
	var out []gotAlert
	for _, a := range all {
		if a.status == "firing" && a.labels["alertname"] == name {
			out = append(out, a)
		}
	}
	return out
}

func (w *webhook) summary() string {
	all, errs := w.snapshot()
	n := map[string]int{}
	for _, a := range all {
		n[a.labels["alertname"]+"/"+a.status]++
	}
	keys := slices.Sorted(maps.Keys(n))
	var b strings.Builder
	fmt.Fprintf(&b, "webhook: %d alerts received", len(all))
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s: %d", k, n[k])
	}
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  error: %s", e)
	}
	return b.String()
}

func readTruth(path string) (simulator.Truth, error) {
	var tr simulator.Truth
	b, err := os.ReadFile(path)
	if err != nil {
		return tr, err
	}
	err = json.Unmarshal(b, &tr)
	return tr, err
}

func scaled(d time.Duration) time.Duration { return time.Duration(float64(d) * scaleFactor) }

// scaledRules are the groups of the scaled rule file, as the checks here
// read them.
type scaledRules struct {
	Groups []struct {
		Rules []struct {
			Alert  string            `yaml:"alert"`
			Expr   string            `yaml:"expr"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// floorAlertExpr is SlotUserFloorNeverZero as shipped: the floor age
// against the floor window each family reports, so that the alert follows
// the exporter's config (and is off for a family with floor_window 0).
const floorAlertExpr = "slot_user_floor_seconds > on (instance, job, family) group_left () (slot_family_floor_window_seconds > 0)"

// checkFloorThreshold makes sure the scaled SlotUserFloorNeverZero still
// compares the floor age with the floor window the exporter reports:
// otherwise the test would check a different alert from the shipped one,
// or a threshold other than the exporter's scaled floor_window, which the
// test checks on the exporter's own page once it runs.
// It returns the alert's severity.
func checkFloorThreshold(t *testing.T, f *scaledRules) string {
	t.Helper()
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "SlotUserFloorNeverZero" {
				continue
			}
			if expr := strings.Join(strings.Fields(r.Expr), " "); expr != floorAlertExpr {
				t.Fatalf("scaled SlotUserFloorNeverZero expr %q: the test expects %q", expr, floorAlertExpr)
			}
			if r.Labels["severity"] == "" {
				t.Fatal("SlotUserFloorNeverZero has no severity label")
			}
			return r.Labels["severity"]
		}
	}
	t.Fatal("no SlotUserFloorNeverZero in the rule file")
	return ""
}

func hostPort(t *testing.T) string {
	return "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
}

// TestAlertsEndToEnd runs the incident through the whole stack: slotsim
// kills most holders at once and leaves zombies and leaked counters behind,
// slot_exporter sweeps Redis, Prometheus scrapes it and evaluates the shipped
// rules (scaled by 1/60), and Alertmanager delivers to a webhook here. It
// proves that the floor alert pages for exactly the users whose usage never
// returns to zero and for no healthy user, that the expiry spike pages after
// the kill, and that every dashboard query returns data on this stack.
func TestAlertsEndToEnd(t *testing.T) {
	began := time.Now()
	binDir, expDir, amDir, promDir, simDir := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	promBin := redistest.Binary(t, "prometheus")
	amBin := redistest.Binary(t, "prometheus-alertmanager", "alertmanager")
	exporterBin, slotsimBin := buildBinaries(t, binDir)
	t.Logf("built slot_exporter and slotsim in %v", time.Since(began).Round(time.Millisecond))

	shipped, err := os.ReadFile(filepath.Join("..", "alerts", "slot_exporter.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := rulescale.Scale(shipped, scaleFactor, scaleMin)
	if err != nil {
		t.Fatalf("rulescale: %v", err)
	}
	floorWindow := scaled(config.DefaultFloorWindow)
	var parsedRules scaledRules
	if err := yaml.Unmarshal(rules, &parsedRules); err != nil {
		t.Fatalf("scaled rules: %v", err)
	}
	floorSeverity := checkFloorThreshold(t, &parsedRules)
	rulesFile := filepath.Join(promDir, "slot_exporter.rules.yml")
	exportertest.WriteFile(t, rulesFile, string(rules))

	rdb := redistest.Start(t)
	hook := &webhook{}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)

	e := newEnv(t) // after every TempDir, see newEnv

	expAddr, amAddr, promAddr := hostPort(t), hostPort(t), hostPort(t)
	prom := promAPI{base: "http://" + promAddr}
	truthFile := filepath.Join(simDir, "truth.json")
	e.onFailure(func() string {
		var b strings.Builder
		b.WriteString(hook.summary())
		// The raw samples of the last two minutes behind the expiry spike
		// and the scrapes, ahead of the long dumps below.
		for _, q := range []string{
			`family:slot_holds_ended_expired:ratio_rate5m{family="streams"}[2m]`,
			`slot_holds_ended_total{family="streams"}[2m]`,
			`up{job="slot_exporter"}[2m]`,
			`scrape_duration_seconds{job="slot_exporter"}[2m]`,
		} {
			b.WriteString("\n===== " + q + "\n" + prom.raw("/api/v1/query?query="+url.QueryEscape(q), 8000))
		}
		b.WriteString("\n===== prometheus alerts\n" + prom.raw("/api/v1/alerts", 30000))
		b.WriteString("\n===== prometheus rules\n" + prom.raw("/api/v1/rules", 60000))
		b.WriteString("\n===== prometheus targets\n" + prom.raw("/api/v1/targets?state=active", 5000))
		b.WriteString("\n===== alertmanager alerts\n" + promAPI{base: "http://" + amAddr}.raw("/api/v2/alerts", 20000))
		tb, _ := os.ReadFile(truthFile)
		b.WriteString("\n===== slotsim truth\n" + string(tb))
		return b.String()
	})

	expConfig := filepath.Join(expDir, "slot_exporter.yml")
	exportertest.WriteFile(t, expConfig, exporterConfig(rdb.Addr, floorWindow))
	writeBullQueue(t, rdb.Client())
	e.start("slot_exporter", exporterBin, "--config.file="+expConfig, "--web.listen-address="+expAddr)

	amConfig := filepath.Join(amDir, "alertmanager.yml")
	exportertest.WriteFile(t, amConfig, alertmanagerConfig(hookSrv.URL+"/alerts"))
	e.start("alertmanager", amBin, "--config.file="+amConfig, "--storage.path="+filepath.Join(amDir, "data"),
		"--web.listen-address="+amAddr, "--cluster.listen-address=")

	promConfig := filepath.Join(promDir, "prometheus.yml")
	exportertest.WriteFile(t, promConfig, prometheusConfig(rulesFile, expAddr, amAddr))
	e.start("prometheus", promBin, "--config.file="+promConfig, "--storage.tsdb.path="+filepath.Join(promDir, "data"),
		"--web.listen-address="+promAddr)

	e.waitHTTP200(20*time.Second, "slot_exporter /-/ready", "http://"+expAddr+"/-/ready")
	e.waitHTTP200(30*time.Second, "alertmanager /-/ready", "http://"+amAddr+"/-/ready")
	e.waitHTTP200(30*time.Second, "prometheus /-/ready", prom.base+"/-/ready")
	e.waitFor(30*time.Second, "prometheus to scrape slot_exporter and load the rules", func() (bool, string) {
		up, err := prom.query(`up{job="slot_exporter"} == 1`)
		if err != nil {
			return false, err.Error()
		}
		var rr struct {
			Groups []struct {
				Name string `json:"name"`
			} `json:"groups"`
		}
		if err := prom.get("/api/v1/rules", nil, &rr); err != nil {
			return false, err.Error()
		}
		return len(up) == 1 && len(rr.Groups) == len(parsedRules.Groups),
			fmt.Sprintf("up: %d series, %d of %d rule groups", len(up), len(rr.Groups), len(parsedRules.Groups))
	})
	// The floor alert's threshold is what the exporter reports: the
	// scaled default floor_window.
	e.waitFor(10*time.Second, "slot_family_floor_window_seconds of the slot family", func() (bool, string) {
		v, err := prom.query(fmt.Sprintf(`slot_family_floor_window_seconds{family=%q}`, slotFamily))
		if err != nil || len(v) != 1 {
			return false, fmt.Sprintf("%v %v", v, err)
		}
		got, _ := strconv.ParseFloat(fmt.Sprint(v[0].Value[1]), 64)
		if got != floorWindow.Seconds() {
			t.Fatalf("the exporter reports a floor window of %vs, the test scaled it to %v", got, floorWindow)
		}
		return true, ""
	})

	simStart := time.Now()
	e.start("slotsim", slotsimBin, slotsimArgs(rdb.Addr, truthFile)...)
	t.Logf("stack up %v after start; slotsim started", simStart.Sub(began).Round(time.Millisecond))

	// The leaked users the floor alert must name: those slotsim has leaked
	// by a moment after the kill, once it has made a zombie. Their usage
	// has been above zero since then at least, so the alert is due
	// floor_window + for: later, plus scrape, evaluation and delivery.
	var snap simulator.Truth
	e.waitFor(killAt+30*time.Second, "slotsim to kill holders and make a zombie", func() (bool, string) {
		tr, err := readTruth(truthFile)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return false, "no truth file yet"
			}
			return false, err.Error()
		}
		snap = tr
		return tr.Killed > 0 && len(tr.ZombieUsers) > 0,
			fmt.Sprintf("killed %d, zombie users %d, leaked users %d, in flight %d, errors %d",
				tr.Killed, len(tr.ZombieUsers), len(tr.LeakedUsers), tr.InFlight, tr.Errors)
	})
	killed := time.Now()
	if snap.Killed < 10 {
		t.Fatalf("slotsim killed only %d holders: too few for an expiry spike; truth %+v", snap.Killed, snap)
	}
	killLowerBound := simStart.Add(killAt)
	want := map[string]bool{}
	for u := range snap.ZombieUsers {
		want[slotFamily+"/"+u] = true
	}
	for u := range snap.LeakedUsers {
		want[counterFamily+"/"+u] = true
	}
	t.Logf("%v after slotsim start: killed %d holders; expecting SlotUserFloorNeverZero for %d zombie users (%s) and %d leaked-counter users (%s)",
		killed.Sub(simStart).Round(time.Millisecond), snap.Killed, len(snap.ZombieUsers), slotFamily, len(snap.LeakedUsers), counterFamily)

	floorKey := func(a gotAlert) string { return a.labels["family"] + "/" + a.labels["user"] }
	due := time.Until(snap.At.Add(floorWindow + 5*time.Second + 40*time.Second))
	e.waitFor(due, "SlotUserFloorNeverZero for every leaked user and SlotHoldsExpiringSpike", func() (bool, string) {
		got := map[string]bool{}
		for _, a := range hook.firing("SlotUserFloorNeverZero") {
			got[floorKey(a)] = true
		}
		var missing []string
		for k := range want {
			if !got[k] {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		spike := len(hook.firing("SlotHoldsExpiringSpike")) > 0
		return len(missing) == 0 && spike, fmt.Sprintf("expiry spike alert: %v; floor alerts missing for %d of %d users: %v",
			spike, len(missing), len(want), missing)
	})
	t.Logf("%v after slotsim start: every expected alert delivered", time.Since(simStart).Round(time.Millisecond))

	// The truth now, to judge every floor alert received: a user may
	// rightly be named only if a fault of the alert's family has hit them.
	final, err := readTruth(truthFile)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]map[string]int64{
		// Zombie slots never go; a future-dated slot of a dead holder never
		// expires. Killed holders' slots expire within ttl: not a floor.
		slotFamily: union(final.ZombieUsers, final.FutureUsers),
		// Every killed holder's counter and every leaked one stays INCRed.
		counterFamily: final.LeakedUsers,
	}
	if final.RateLimits == nil || final.Locks == nil || final.ListQueues == nil || final.StreamQueues == nil {
		t.Fatalf("slotsim's truth lacks a recipe: %+v", final)
	}
	// The other recipes: any user driven with a failure may be named
	// (a counter without TTL, a lock never released, a queue nobody
	// consumes, a dead consumer), no healthy one.
	for fam, users := range map[string]map[string]string{
		rateFamily: final.RateLimits.Users, lockFamily: final.Locks.Users,
		listFamily: final.ListQueues.Users, streamFamily: final.StreamQueues.Users,
	} {
		allowed[fam] = map[string]int64{}
		for u, mode := range users {
			if mode != simulator.ModeHealthy {
				allowed[fam][u] = 1
			}
		}
	}
	var wrong []string
	for _, a := range hook.firing("SlotUserFloorNeverZero") {
		fam, user := a.labels["family"], a.labels["user"]
		switch set, ok := allowed[fam]; {
		case !ok:
			wrong = append(wrong, fmt.Sprintf("unknown family %q: %v", fam, a.labels))
		case set[user] == 0:
			wrong = append(wrong, fmt.Sprintf("healthy user %q of %s (started %v after slotsim): no zombie, future or leaked counter in slotsim's truth",
				user, fam, a.startsAt.Sub(simStart).Round(time.Second)))
		case a.labels["instance"] != expAddr || a.labels["job"] != "slot_exporter" || a.labels["severity"] != floorSeverity:
			wrong = append(wrong, fmt.Sprintf("labels %v: want instance %s, job slot_exporter, severity %s", a.labels, expAddr, floorSeverity))
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%d wrong SlotUserFloorNeverZero alerts, e.g.:\n  %s", len(wrong), strings.Join(wrong[:min(len(wrong), 10)], "\n  "))
	}
	// The check above means something only if healthy users were seen at
	// all: they had per-user series, and no alert.
	healthySeen := map[string]int{}
	active, err := prom.query(`group by (family, user) (max_over_time(slot_user_used_max[5m]) > 0)`)
	if err != nil {
		t.Fatal(err)
	}
	faulty := union(final.KilledUsers, final.CrashedUsers, final.ZombieUsers, final.LeakedUsers, final.FutureUsers, final.LostUsers)
	for _, s := range active {
		if faulty[s.Metric["user"]] == 0 {
			healthySeen[s.Metric["family"]]++
		}
	}
	for _, fam := range []string{slotFamily, counterFamily} {
		if healthySeen[fam] < 20 {
			t.Errorf("only %d healthy users of %s had per-user series: the no-alert-for-healthy-users check proves little", healthySeen[fam], fam)
		}
	}
	t.Logf("healthy users with per-user series and no floor alert: %v", healthySeen)

	spikes := hook.firing("SlotHoldsExpiringSpike")
	for _, a := range spikes {
		if a.startsAt.Before(killLowerBound) {
			t.Errorf("SlotHoldsExpiringSpike started at %v, before the kill (not before %v): %v", a.startsAt, killLowerBound, a.labels)
		}
		if a.labels["family"] != slotFamily {
			t.Errorf("SlotHoldsExpiringSpike for family %q, want %s: %v", a.labels["family"], slotFamily, a.labels)
		}
	}
	if len(spikes) > 0 {
		// The margin of the spike rule at this scale, to tell a rule about
		// to stop firing from one that fires comfortably.
		peak, _ := prom.query(`max_over_time(family:slot_holds_ended_expired:ratio_rate5m{family="streams"}[2m])`)
		above, _ := prom.query(`count_over_time((family:slot_holds_ended_expired:ratio_rate5m{family="streams"} > 0.5)[2m:500ms])`)
		var p, a any
		if len(peak) > 0 {
			p = peak[0].Value[1]
		}
		if len(above) > 0 {
			a = above[0].Value[1]
		}
		t.Logf("SlotHoldsExpiringSpike started %v after the earliest kill time; expired share peaked at %v, above 0.5 for %v evaluations",
			spikes[0].startsAt.Sub(killLowerBound).Round(time.Millisecond), p, a)
	}
	if _, errs := hook.snapshot(); len(errs) > 0 {
		t.Errorf("webhook: %v", errs)
	}

	checkDashboards(t, prom, hook)
	t.Log(hook.summary())
	t.Logf("total %v", time.Since(began).Round(time.Millisecond))
}

func union(ms ...map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for _, m := range ms {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

// checkDashboards runs every target of every shipped dashboard against the
// test's Prometheus, after the incident, with the variables resolved as
// Grafana would: multi-value ones set to All, single-value ones tried with
// each value, $user set to a user the floor alert named for that family.
// Every query must return a series for at least one choice; a query that
// returns nothing anywhere is a wrong query or a metric the stack lacks.
func checkDashboards(t *testing.T, prom promAPI, hook *webhook) {
	dashes, err := loadDashboards(filepath.Join("..", "dashboards"))
	if err != nil {
		t.Fatal(err)
	}
	leakedBy := map[string][]string{}
	for _, a := range hook.firing("SlotUserFloorNeverZero") {
		leakedBy[a.labels["family"]] = append(leakedBy[a.labels["family"]], a.labels["user"])
	}
	pick := func(name string, raw map[string]string, values []string) ([]string, error) {
		if name == "family" {
			// The user dashboard is opened from a page: the families
			// some user was paged for (the framework families here hold
			// one healthy queue).
			paged := slices.DeleteFunc(slices.Clone(values), func(f string) bool { return len(leakedBy[f]) == 0 })
			if len(paged) > 0 {
				values = paged
			}
		}
		if name != "user" {
			return values[:min(len(values), 4)], nil
		}
		for _, v := range values {
			if slices.Contains(leakedBy[raw["family"]], v) {
				return []string{v}, nil
			}
		}
		return nil, fmt.Errorf("no user named by SlotUserFloorNeverZero for family %q among the values", raw["family"])
	}
	total := 0
	for _, d := range dashes {
		choices, err := d.choices(prom, pick)
		if err != nil {
			t.Errorf("%s: %v", d.file, err)
			continue
		}
		for _, tg := range d.targets {
			total++
			var empty []string
			ok := false
			for _, c := range choices {
				expr, err := substitute(tg.expr, c.vals)
				if err != nil {
					t.Errorf("%s: panel %q %s: %v", d.file, tg.panel, tg.refID, err)
					break
				}
				res, err := prom.query(expr)
				if err != nil {
					t.Errorf("%s: panel %q %s [%s]: query %s: %v", d.file, tg.panel, tg.refID, c.desc, expr, err)
					continue
				}
				if len(res) > 0 {
					ok = true
					continue
				}
				empty = append(empty, fmt.Sprintf("[%s] %s: %s", c.desc, expr, explainEmpty(prom, expr)))
			}
			switch {
			case !ok && len(empty) > 0:
				t.Errorf("%s: panel %q %s returns no series for any variable choice:\n  %s",
					d.file, tg.panel, tg.refID, strings.Join(empty, "\n  "))
			case len(empty) > 0:
				t.Logf("%s: panel %q %s is empty for some choices (expected where a metric belongs to one family kind):\n  %s",
					d.file, tg.panel, tg.refID, strings.Join(empty, "\n  "))
			}
		}
		descs := make([]string, len(choices))
		for i, c := range choices {
			descs[i] = c.desc
		}
		t.Logf("%s: %d queries, variable choices %q", d.file, len(d.targets), descs)
	}
	if total == 0 {
		t.Error("no dashboard queries found")
	}
}
