package alerts

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/alerts/lint"
	"github.com/slotexporter/slot_exporter/config"
	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/redistest"
)

// docRow is one row of the metric catalog table of docs/design.md.
type docRow struct {
	name, typ string
	labels    []string // the ones in braces: family (and user) aside
}

// docCatalog reads the metric catalog table of docs/design.md: rows that
// start with "| `slot_". The expected metrics of TestCatalog come from the
// document, so that the document and the exporter cannot drift apart.
func docCatalog(t *testing.T) map[string]docRow {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[string]docRow{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `slot_") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("docs/design.md: catalog row without a type: %q", line)
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		var r docRow
		if i := strings.IndexByte(name, '{'); i >= 0 {
			r.labels = strings.Split(strings.TrimSuffix(name[i+1:], "}"), ",")
			name = name[:i]
		}
		r.name, r.typ = name, strings.TrimSpace(cells[2])
		if _, dup := rows[name]; dup {
			t.Fatalf("docs/design.md: %s is listed twice", name)
		}
		rows[name] = r
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) < 40 {
		t.Fatalf("docs/design.md: only %d catalog rows found: has the table's format changed?", len(rows))
	}
	return rows
}

// kindOf is the kind whose families alone emit a metric, by the catalog's
// naming; "" for the metrics every kind (or the exporter) emits. Members
// and holds are shared by slot sets and locks, and slot sets are always
// there.
func kindOf(name string) config.Kind {
	switch {
	case strings.HasPrefix(name, "slot_jobs"), name == "slot_queue_jobs", name == "slot_family_max_wait_seconds":
		return config.KindBullMQ
	case name == "slot_workers":
		return config.KindSidekiq
	case strings.HasPrefix(name, "slot_ratelimit_"):
		return config.KindRateLimit
	case strings.HasPrefix(name, "slot_queue"):
		return config.KindList
	case strings.HasPrefix(name, "slot_stream_"):
		return config.KindStream
	case name == "slot_counters_negative":
		return config.KindCounter
	}
	return config.KindSlotSet
}

// catalogFamilies are one family of every kind there is a test seed for;
// catalogSeed writes what makes each of them show every metric of its
// kind: a user over its limit, queued and pending work, a lock.
var catalogFamilies = map[config.Kind]redisproc.Family{
	config.KindSlotSet:   redisproc.Slots(),
	config.KindCounter:   redisproc.Counters(),
	config.KindRateLimit: {Name: "api_rate", Kind: "ratelimit", Match: "rl:api:*", Limit: 100, Extra: []string{"window: 1m"}},
	config.KindLock:      {Name: "jobs_lock", Kind: "lock", Match: "lock:job:*", TTL: 30 * time.Second, MaxHold: 10 * time.Minute},
	config.KindList:      {Name: "mail_queue", Kind: "list", Match: "queue:mail:*", Extra: []string{"max_wait: 5m"}},
	config.KindStream:    {Name: "events", Kind: "stream", Match: "stream:events:*", MaxHold: 5 * time.Minute},
	config.KindBullMQ:    {Name: "jobs", Kind: "bullmq"},
	config.KindSidekiq:   {Name: "sidekiq_jobs", Kind: "sidekiq"},
	config.KindRQ:        {Name: "rq_jobs", Kind: "rq"},
	config.KindCelery:    {Name: "tasks", Kind: "celery"},
}

func catalogSeed(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	live := float64(time.Now().Add(115 * time.Second).UnixMilli())
	pipe := c.Pipeline()
	for i := range 4 {
		pipe.ZAdd(ctx, redisproc.SlotKey("over"), redis.Z{Score: live, Member: fmt.Sprint(i)})
	}
	pipe.PExpire(ctx, redisproc.SlotKey("over"), 240*time.Second)
	pipe.Set(ctx, redisproc.CounterKey("u1"), 2, 0)
	pipe.Set(ctx, "rl:api:{u1}", 5, time.Minute)
	pipe.Set(ctx, "lock:job:{j1}", "token-1", 30*time.Second)
	pipe.RPush(ctx, "queue:mail:{t1}", "a", "b")
	for i := range 3 {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: "stream:events:{s1}", Values: []string{"n", fmt.Sprint(i)}})
	}
	pipe.XGroupCreate(ctx, "stream:events:{s1}", "g1", "0")
	// A BullMQ queue with a job waiting and one started by a worker that
	// is gone (no lock): a queue series.
	pipe.Incr(ctx, "bull:mail:id")
	pipe.LPush(ctx, "bull:mail:wait", "2")
	pipe.HSet(ctx, "bull:mail:2", "name", "welcome", "timestamp", time.Now().UnixMilli())
	pipe.LPush(ctx, "bull:mail:active", "1")
	pipe.HSet(ctx, "bull:mail:1", "name", "welcome", "timestamp", time.Now().UnixMilli(), "processedOn", time.Now().UnixMilli(), "atm", 1)
	// Sidekiq: a job waiting and a process listed whose heartbeat is
	// gone (dead). RQ: a job started by a worker that is gone (its
	// registry entry past its expiry).
	pipe.SAdd(ctx, "queues", "default")
	pipe.LPush(ctx, "queue:default", fmt.Sprintf(`{"jid":"j1","class":"Job","enqueued_at":%d}`, time.Now().Unix()))
	pipe.SAdd(ctx, "processes", "host:1:abc")
	pipe.SAdd(ctx, "rq:queues", "rq:queue:default")
	pipe.ZAdd(ctx, "rq:wip:default", redis.Z{Score: float64(time.Now().Unix() - 60), Member: "r1"})
	pipe.HSet(ctx, "rq:job:r1", "description", "tasks.run()", "started_at", time.Now().UTC().Add(-2*time.Minute).Format("2006-01-02T15:04:05.000000Z"))
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	// Two of three delivered and not acked: pending, and lag 1.
	if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g1", Consumer: "c1", Streams: []string{"stream:events:{s1}", ">"}, Count: 2}).Err(); err != nil {
		t.Fatal(err)
	}
}

// startBinary builds the exporter as users build it (the product module,
// with its own go.mod) and runs it with args on a free port until the test
// ends; it returns the base URL once the exporter answers.
func startBinary(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	bins, err := redisproc.BuildBinaries(context.Background(), dir, ".")
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	var logs exportertest.Buffer
	cmd := exec.Command(bins[0], append([]string{"--web.listen-address=" + base}, args...)...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error // set before exited is closed
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("the exporter did not stop on SIGTERM within a minute")
		}
		if t.Failed() {
			t.Logf("exporter log:\n%s", logs.String())
		}
	})
	base = "http://" + base
	exportertest.WaitFor(t, 2*time.Minute, "the exporter answering", func() bool {
		select {
		case <-exited:
			t.Fatalf("the exporter exited: %v", waitErr)
		default:
		}
		resp, err := http.Get(base + "/-/healthy")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// TestCatalog runs the exporter binary against a real Redis with a family of
// every registered kind and checks its /metrics page against the metric
// catalog of docs/design.md: every metric of the table whose kind is
// registered is there, with the table's type; nothing named slot_* is
// there that the table does not list; and alerts/lint's catalog, which
// rules and dashboards are checked against, has the same names, types
// and labels.
func TestCatalog(t *testing.T) {
	var fams []redisproc.Family
	registered := kind.Registered()
	for _, k := range registered {
		f, ok := catalogFamilies[k]
		if !ok {
			t.Fatalf("kind %s is registered but TestCatalog has no family for it: add one to catalogFamilies and catalogSeed", k)
		}
		fams = append(fams, f)
	}
	srv := redistest.Start(t)
	catalogSeed(t, srv.Client())
	cfg := filepath.Join(t.TempDir(), "slot_exporter.yml")
	exportertest.WriteFile(t, cfg, redisproc.Config{
		Addr: srv.Addr, Sampling: []string{"interval: 200ms", "window: 1s"}, Families: fams,
	}.YAML())
	base := startBinary(t, "--config.file="+cfg)

	doc := docCatalog(t)
	var want []string
	for name := range doc {
		if slices.Contains(registered, kindOf(name)) {
			want = append(want, name)
		}
	}
	sort.Strings(want)
	// One sweep is enough; the deadline only ends a hung test.
	var page map[string]*familyOnPage
	var missing []string
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		page = parsePage(t, get(t, base+"/metrics"))
		missing = missing[:0]
		for _, name := range want {
			if page[name] == nil {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, name := range missing {
		t.Errorf("%s is in the catalog of docs/design.md but not on /metrics", name)
	}
	for name, got := range page {
		if !strings.HasPrefix(name, "slot_") {
			continue
		}
		row, ok := doc[name]
		if !ok {
			t.Errorf("%s is on /metrics but not in the catalog of docs/design.md", name)
			continue
		}
		if got.typ != row.typ {
			t.Errorf("%s is a %s on /metrics, a %s in docs/design.md", name, got.typ, row.typ)
		}
		for _, l := range row.labels {
			if !slices.Contains(got.labels, l) {
				t.Errorf("%s on /metrics has labels %v, without %s of docs/design.md", name, got.labels, l)
			}
		}
		lm, ok := lint.CatalogMetric(name)
		switch {
		case !ok:
			t.Errorf("%s is on /metrics but not in alerts/lint's catalog", name)
		case string(lm.Type) != got.typ:
			t.Errorf("%s is a %s on /metrics, a %s in alerts/lint's catalog", name, got.typ, lm.Type)
		case !slices.Equal(sorted(lm.Labels), got.labels):
			t.Errorf("%s has labels %v on /metrics, %v in alerts/lint's catalog", name, got.labels, sorted(lm.Labels))
		}
	}
	// The two catalogs name the same metrics.
	for _, m := range lint.Catalog {
		if _, ok := doc[m.Name]; !ok {
			t.Errorf("alerts/lint's catalog has %s, docs/design.md does not", m.Name)
		}
	}
	for name := range doc {
		if _, ok := lint.CatalogMetric(name); !ok {
			t.Errorf("docs/design.md has %s, alerts/lint's catalog does not", name)
		}
	}
}

// familyOnPage is what a /metrics page says of one metric.
type familyOnPage struct {
	typ    string
	labels []string // sorted, over all its samples; le aside
}

func parsePage(t *testing.T, body string) map[string]*familyOnPage {
	t.Helper()
	out := map[string]*familyOnPage{}
	for name, mf := range exportertest.ParsePage(t, body) {
		f := &familyOnPage{typ: strings.ToLower(mf.GetType().String())}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(f.labels, l.GetName()) {
					f.labels = append(f.labels, l.GetName())
				}
			}
		}
		sort.Strings(f.labels)
		out[name] = f
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}
