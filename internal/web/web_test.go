package web_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/release"
	"github.com/slotexporter/slot_exporter/internal/web"
	"github.com/slotexporter/slot_exporter/internal/web/webtest"
)

func TestReleaseRefusals(t *testing.T) {
	e := webtest.New(t, webtest.Options{Release: true})
	e.SeedLeaky("u1")
	e.H.Sweep()

	// Wrong or missing credentials: exporter-toolkit answers 401 on
	// every path, the action included.
	for _, path := range []string{"/leaks", "/leaks/streams/u1", "/leaks/streams/u1/preview"} {
		if code, _, _ := e.Do(http.MethodGet, path, webtest.Alice, "wrong", nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong password: %d, want 401", path, code)
		}
		if code, _, _ := e.Do(http.MethodGet, path, "", "", nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", path, code)
		}
	}
	if code, _, _ := e.Do(http.MethodPost, "/leaks/streams/u1/release", webtest.Alice, "wrong", url.Values{"reason": {"x"}}); code != http.StatusUnauthorized {
		t.Errorf("POST the action with a wrong password: %d, want 401", code)
	}

	// GET on the action: 405, with Allow.
	code, hdr, _ := e.Do(http.MethodGet, "/leaks/streams/u1/release", webtest.Alice, webtest.AlicePass, nil)
	if code != http.StatusMethodNotAllowed || hdr.Get("Allow") != "POST" {
		t.Errorf("GET on the action: %d Allow %q, want 405 POST", code, hdr.Get("Allow"))
	}

	code, page := e.Get("/leaks/streams/u1/preview")
	if code != http.StatusOK {
		t.Fatalf("preview: %d\n%s", code, page)
	}
	plan, csrf := webtest.FormValue(page, "plan"), webtest.FormValue(page, "csrf")
	if plan == "" || csrf == "" {
		t.Fatalf("the preview has no plan or CSRF token:\n%s", page)
	}
	post := func(user, pass string, form url.Values) int {
		code, _, _ := e.Do(http.MethodPost, "/leaks/streams/u1/release", user, pass, form)
		return code
	}
	for _, c := range []struct {
		name string
		user string
		pass string
		form url.Values
		want int
	}{
		{"no CSRF token", webtest.Alice, webtest.AlicePass, url.Values{"plan": {plan}, "reason": {"x"}}, http.StatusForbidden},
		{"a forged token", webtest.Alice, webtest.AlicePass, url.Values{"plan": {plan}, "csrf": {"9999999999.AAAA"}, "reason": {"x"}}, http.StatusForbidden},
		{"alice's token, sent by bob", webtest.Bob, webtest.BobPass, url.Values{"plan": {plan}, "csrf": {csrf}, "reason": {"x"}}, http.StatusForbidden},
		{"the token for another preview", webtest.Alice, webtest.AlicePass, url.Values{"plan": {"0123"}, "csrf": {csrf}, "reason": {"x"}}, http.StatusForbidden},
		{"no reason", webtest.Alice, webtest.AlicePass, url.Values{"plan": {plan}, "csrf": {csrf}, "reason": {"  "}}, http.StatusBadRequest},
	} {
		if got := post(c.user, c.pass, c.form); got != c.want {
			t.Errorf("POST with %s: %d, want %d", c.name, got, c.want)
		}
	}
	if n, err := e.Admin.ZCard(context.Background(), "joishi:streams:{u1}").Result(); err != nil || n != 5 {
		t.Fatalf("after refused POSTs the set has %d members (%v), want 5 untouched", n, err)
	}
	// The token in the query string, not the form, is no token either.
	code, _, _ = e.Do(http.MethodPost, "/leaks/streams/u1/release?csrf="+url.QueryEscape(csrf)+"&plan="+plan, webtest.Alice, webtest.AlicePass, url.Values{"reason": {"x"}})
	if code != http.StatusForbidden {
		t.Errorf("POST with the token in the URL: %d, want 403", code)
	}

	good := url.Values{"plan": {plan}, "csrf": {csrf}, "reason": {"dead holders"}}
	if got, _, body := e.Do(http.MethodPost, "/leaks/streams/u1/release", webtest.Alice, webtest.AlicePass, good); got != http.StatusOK ||
		!strings.Contains(body, "Recorded in the audit file with the reason") {
		t.Fatalf("the real release: %d\n%s", got, body)
	}
	if got := post(webtest.Alice, webtest.AlicePass, good); got != http.StatusConflict {
		t.Errorf("the same preview confirmed twice: %d, want 409", got)
	}

	refused, released := 0, 0
	for _, r := range e.Records() {
		switch {
		case r.Action == release.ActionRelease && r.Result == release.ResultRefused:
			refused++
		case r.Action == release.ActionRelease && r.Result == release.ResultReleased:
			released++
			if r.Operator != webtest.Alice || r.Reason != "dead holders" {
				t.Errorf("release line %+v", r)
			}
		}
	}
	if refused != 7 || released != 1 {
		t.Errorf("audited %d refused and %d released releases, want 7 and 1", refused, released)
	}
	_, metrics := e.Get("/metrics")
	for _, want := range []string{`slot_exporter_releases_total{result="refused"} 7`, `slot_exporter_releases_total{result="released"} 1`, `slot_exporter_releases_total{result="previewed"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if c := e.Rel.Counts(); c["refused"] != 7 || c["released"] != 1 || c["previewed"] != 1 {
		t.Errorf("counts %v", c)
	}

	// An audit file that cannot take records: nothing is released, and
	// the page does not say it was recorded.
	e.SeedLeaky("u2")
	_, page = e.Get("/leaks/streams/u2/preview")
	form := url.Values{"plan": {webtest.FormValue(page, "plan")}, "csrf": {webtest.FormValue(page, "csrf")}, "reason": {"disk gone"}}
	if err := os.Rename(e.Audit, e.Audit+".aside"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(e.Audit, 0o700); err != nil {
		t.Fatal(err)
	}
	code, _, body := e.Do(http.MethodPost, "/leaks/streams/u2/release", webtest.Alice, webtest.AlicePass, form)
	if code != http.StatusBadGateway || strings.Contains(body, "Recorded in the audit file") || !strings.Contains(body, "Not recorded in the audit file") {
		t.Errorf("a release with the audit file a directory: %d, want 502 saying it is not recorded:\n%s", code, body)
	}
	if err := os.Remove(e.Audit); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(e.Audit+".aside", e.Audit); err != nil {
		t.Fatal(err)
	}

	// Operators removed from the web config while running: the toolkit
	// stops asking for credentials, and release stops too, rather than
	// trusting any name a request sends.
	exportertest.WriteFile(t, e.WebCfg, "")
	code, _, _ = e.Do(http.MethodGet, "/leaks/streams/u1/preview", "mallory", "x", nil)
	if code != http.StatusForbidden {
		t.Errorf("preview with the operators gone from the web config: %d, want 403", code)
	}
}

// TestReleaseDisabled: without --web.enable-release there is no button,
// and the preview and action are not found.
func TestReleaseDisabled(t *testing.T) {
	e := webtest.New(t, webtest.Options{})
	e.SeedLeaky("u1")
	e.H.Sweep()
	code, page := e.Get("/leaks/streams/u1")
	if code != http.StatusOK {
		t.Fatalf("user page: %d", code)
	}
	body := page[strings.Index(page, "</style>"):]
	if strings.Contains(body, "/preview") || strings.Contains(strings.ToLower(body), "release") {
		t.Errorf("the user page offers a release with release off:\n%s", page)
	}
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if code, _, _ := e.Do(m, "/leaks/streams/u1/preview", webtest.Alice, webtest.AlicePass, nil); code != http.StatusNotFound {
			t.Errorf("%s preview with release off: %d, want 404", m, code)
		}
		if code, _, _ := e.Do(m, "/leaks/streams/u1/release", webtest.Alice, webtest.AlicePass, url.Values{"reason": {"x"}}); code != http.StatusNotFound {
			t.Errorf("%s release with release off: %d, want 404", m, code)
		}
	}
}

// TestCheckRelease: release refuses to start without operators or an
// audit file.
func TestCheckRelease(t *testing.T) {
	dir := t.TempDir()
	users, none, bad := dir+"/users.yml", dir+"/none.yml", dir+"/bad.yml"
	exportertest.WriteFile(t, users, webtest.Users)
	exportertest.WriteFile(t, none, "http_server_config:\n  http2: false\n")
	exportertest.WriteFile(t, bad, "basic_auth_users: [\n")
	for _, c := range []struct {
		web, audit, want string
	}{
		{"", "a.jsonl", "needs --web.config.file with basic_auth_users"},
		{none, "a.jsonl", "needs basic_auth_users in --web.config.file"},
		{bad, "a.jsonl", "--web.config.file:"},
		{dir + "/missing.yml", "a.jsonl", "--web.config.file:"},
		{users, "", "needs --release.audit-file"},
	} {
		err := web.CheckRelease(c.web, c.audit)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("web.CheckRelease(%q, %q) = %v, want an error containing %q", c.web, c.audit, err, c.want)
		}
	}
	if err := web.CheckRelease(users, "a.jsonl"); err != nil {
		t.Errorf("CheckRelease with users and an audit file: %v", err)
	}
}

// TestLiveReadsRateLimited: the live page answers 429 beyond its budget.
func TestLiveReadsRateLimited(t *testing.T) {
	e := webtest.New(t, webtest.Options{LiveReads: 0.001, LiveBurst: 2})
	e.SeedLeaky("u1")
	codes := []int{}
	var retry string
	for range 3 {
		code, hdr, _ := e.Do(http.MethodGet, "/leaks/streams/u1", webtest.Alice, webtest.AlicePass, nil)
		codes = append(codes, code)
		retry = hdr.Get("Retry-After")
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != http.StatusTooManyRequests || retry == "" {
		t.Errorf("three reads with a burst of 2: %v (Retry-After %q), want 200 200 429 with Retry-After", codes, retry)
	}
	// /leaks reads the snapshot, not Redis: never limited.
	if code, _ := e.Get("/leaks"); code != 200 {
		t.Errorf("/leaks after the live budget ran out: %d", code)
	}
}

// TestPprofFlag: profiles only with --web.enable-pprof, and linked only
// then.
func TestPprofFlag(t *testing.T) {
	for _, on := range []bool{false, true} {
		e := webtest.New(t, webtest.Options{Pprof: on, NoAuth: true})
		code, _ := e.Get("/debug/pprof/")
		_, landing := e.Get("/")
		linked := strings.Contains(landing, "debug/pprof")
		if on && (code != 200 || !linked) {
			t.Errorf("pprof on: /debug/pprof/ %d, linked %v; want 200 and linked", code, linked)
		}
		if !on && (code != http.StatusNotFound || linked) {
			t.Errorf("pprof off: /debug/pprof/ %d, linked %v; want 404 and no link", code, linked)
		}
		if !strings.Contains(landing, `href="/leaks"`) {
			t.Errorf("the landing page does not link /leaks:\n%s", landing)
		}
	}
}

// TestHealthReadyReload: the endpoints moved out of main answer as they
// did.
func TestHealthReadyReload(t *testing.T) {
	e := webtest.New(t, webtest.Options{NoAuth: true})
	if code, body := e.Get("/-/healthy"); code != 200 || body != "Healthy\n" {
		t.Errorf("/-/healthy: %d %q", code, body)
	}
	if code, _ := e.Get("/-/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("/-/ready before a sweep: %d, want 503", code)
	}
	e.H.Sweep()
	if code, _ := e.Get("/-/ready"); code != 200 {
		t.Errorf("/-/ready after a sweep: %d", code)
	}
	if code, hdr, _ := e.Do(http.MethodGet, "/-/reload", "", "", nil); code != http.StatusMethodNotAllowed || hdr.Get("Allow") != "POST, PUT" {
		t.Errorf("GET /-/reload: %d Allow %q", code, hdr.Get("Allow"))
	}
	if code, _, body := e.Do(http.MethodPost, "/-/reload", "", "", nil); code != 200 || body != "Reloaded\n" {
		t.Errorf("POST /-/reload: %d %q", code, body)
	}
	if code, _, _ := e.Do(http.MethodPost, "/leaks", "", "", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /leaks: %d, want 405", code)
	}
	if code, _ := e.Get("/leaks/nosuch/u1"); code != http.StatusNotFound {
		t.Errorf("an unknown family: %d, want 404", code)
	}
}

// TestOtherKinds: what each kind's key holds, on its user page.
func TestOtherKinds(t *testing.T) {
	e := webtest.New(t, webtest.Options{NoAuth: true})
	ctx := context.Background()
	e.Admin.Set(ctx, "legacy:u1", "7", 0)
	e.Admin.Set(ctx, "rl:api:u1", "42", 45*time.Second)
	e.Admin.Set(ctx, "lock:job:eu-u1", "tok-<1>", 20*time.Second) // found by SCAN: the user regexp has no inverse
	e.Admin.Set(ctx, "lock:job:eu-u2", "tok-forever", 0)
	e.Admin.LPush(ctx, "queue:mail:u1", "newest", strings.Repeat("x", 300)+"<b>")
	e.Admin.RPush(ctx, "queue:mail:u1", `{"to":"<a@b>"}`) // the pop side (right) is next
	e.Admin.XAdd(ctx, &redis.XAddArgs{Stream: "stream:events:u1", ID: "1-1", Values: []any{"k", "v"}})
	e.Admin.XAdd(ctx, &redis.XAddArgs{Stream: "stream:events:u1", ID: "2-1", Values: []any{"k", "v"}})
	e.Admin.XGroupCreate(ctx, "stream:events:u1", "workers", "0")
	e.Admin.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "w<1>", Streams: []string{"stream:events:u1", ">"}, Count: 1})

	for _, c := range []struct {
		path string
		want []string
	}{
		{"/leaks/legacy/u1", []string{"legacy:u1", `<dd class="mono">7</dd>`, "none (the key never expires)"}},
		{"/leaks/api/u1", []string{`<dd class="mono">42</dd>`, "s left"}},
		{"/leaks/jobs/u1", []string{"tok-&lt;1&gt;", ">live<", "s left"}},
		{"/leaks/jobs/u2", []string{"tok-forever", "no lease", "none (the key never expires)"}},
		{"/leaks/mail/u1", []string{"<dd>3</dd>", "{&#34;to&#34;:&#34;&lt;a@b&gt;&#34;}"}},
		{"/leaks/events/u1", []string{"Entries: 2", "workers", "1 pending", "w&lt;1&gt;", "last delivered <span class=\"mono\">1-1</span>"}},
	} {
		code, page := e.Get(c.path)
		if code != 200 {
			t.Errorf("%s: %d\n%s", c.path, code, page)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(page, w) {
				t.Errorf("%s lacks %q", c.path, w)
			}
		}
	}
	// The head of a queue is cut, and what is cut stays escaped.
	e.Admin.RPush(ctx, "queue:mail:u2", strings.Repeat("y", 300)+"<script>")
	_, page := e.Get("/leaks/mail/u2")
	if strings.Contains(page, "<script>") || !strings.Contains(page, "(first 200 bytes)") {
		t.Errorf("a long queue head is not cut or not escaped")
	}
}

// TestHostileUserIDs: ids that are markup, quotes, invalid UTF-8, or hold
// a slash: escaped everywhere, and every link leads to the user.
func TestHostileUserIDs(t *testing.T) {
	// Two live reads a user and one more: beyond the default burst.
	e := webtest.New(t, webtest.Options{Release: true, LiveBurst: 100})
	hostile := []string{`<script>alert(1)</script>`, `"quoted' & <b>`, "\xff\xfe\x00bad", "a/b", "pct%2F%zz", ".", ".."}
	for _, u := range hostile {
		e.SeedLeaky(u)
	}
	e.H.Sweep()
	_, page := e.Get("/leaks")
	if strings.Contains(page, "<script") || strings.Contains(page, "<b>") {
		t.Fatalf("/leaks carries raw markup from a user id")
	}
	links := regexp.MustCompile(`href="(/leaks/streams/[^"#]+)"`).FindAllStringSubmatch(page, -1)
	if len(links) != len(hostile) {
		t.Fatalf("/leaks links %d users of streams, want %d", len(links), len(hostile))
	}
	for _, l := range links {
		path := strings.ReplaceAll(l[1], "&amp;", "&")
		code, page := e.Get(path)
		if code != 200 {
			t.Errorf("%s: %d", path, code)
			continue
		}
		if strings.Contains(page, "<script") || strings.Contains(page, "<b>") {
			t.Errorf("%s carries raw markup", path)
		}
		if !strings.Contains(page, ">crashed-1<") || !strings.Contains(page, "Found by</dt><dd>the match pattern with {user}") {
			t.Errorf("%s does not show the user's key", path)
		}
		code, page = e.Get(path + "/preview")
		if code != 200 || !strings.Contains(page, `name="csrf"`) {
			t.Errorf("%s/preview: %d", path, code)
		}
	}
	// A family name that is not UTF-8 is named once quoted.
	if code, page := e.Get("/leaks/%ff/u1"); code != http.StatusNotFound || !strings.Contains(page, `no family &#34;\xff&#34; in the config`) {
		t.Errorf("/leaks/%%ff/u1: %d, want 404 naming the family \"\\xff\":\n%s", code, page)
	}
	// A kind that is not released is not read: no time of a read.
	if code, page := e.Get("/leaks/mail/u1/preview"); code != 200 || !strings.Contains(page, "<dt>Read at</dt><dd>not read</dd>") {
		t.Errorf("the preview of a queue family: %d, want it to say it read nothing:\n%s", code, page)
	}
}

// TestBigMembersAndHeadsAreCut: a 5 MB slot-set member and a 5 MB queue
// head make small pages that say they are cut; the preview keeps the
// member with its reason, the release leaves it in Redis, and no audit
// line holds it. A cut that splits a UTF-8 character shows the text
// before it, not a quoted string.
func TestBigMembersAndHeadsAreCut(t *testing.T) {
	e := webtest.New(t, webtest.Options{Release: true})
	ctx := context.Background()
	now := e.Now()
	big := strings.Repeat("b", 5<<20)
	accented := "a" + strings.Repeat("é", 300) // byte 200 splits an é
	key := "joishi:streams:{fat}"
	e.Admin.ZAdd(ctx, key,
		redis.Z{Score: float64(now - 60_000), Member: big},
		redis.Z{Score: float64(now - 60_000), Member: accented},
		redis.Z{Score: float64(now - 60_000), Member: "dead-1"},
		redis.Z{Score: float64(now + 110_000), Member: "live-1"})
	e.Admin.RPush(ctx, "queue:mail:fat", strings.Repeat("h", 5<<20))

	e.H.Sweep()
	code, page := e.Get("/leaks/streams/fat")
	if code != 200 || len(page) > 64<<10 {
		t.Fatalf("the user page: %d, %d bytes", code, len(page))
	}
	for _, want := range []string{strings.Repeat("b", 200) + " … (5242880 bytes)", "a" + strings.Repeat("é", 99) + " … (601 bytes)", "2 member(s) longer than 512 bytes", ">dead-1<"} {
		if !strings.Contains(page, want) {
			t.Errorf("the user page lacks %.80q", want)
		}
	}
	// A cut member is looked up in the member table by its hash, taken
	// as it streamed: a zombie shows as one however long its name.
	if n := strings.Count(page, "<br>(held "); n != 4 || strings.Contains(page, "not tracked") {
		t.Errorf("the user page gives %d members a first-seen time after a sweep, want all 4:\n%s", n, page)
	}
	code, page = e.Get("/leaks/mail/fat")
	if code != 200 || len(page) > 64<<10 || !strings.Contains(page, "(first 200 bytes), 5242880 bytes in all") {
		t.Errorf("the queue page: %d, %d bytes, cut noted %v", code, len(page), strings.Contains(page, "5242880 bytes in all"))
	}

	code, page = e.Get("/leaks/streams/fat/preview")
	if code != 200 || len(page) > 64<<10 {
		t.Fatalf("the preview: %d, %d bytes", code, len(page))
	}
	for _, want := range []string{"Release 1 member(s)", "Why kept", "a release does not remove", ">live<"} {
		if !strings.Contains(page, want) {
			t.Errorf("the preview lacks %q", want)
		}
	}
	form := url.Values{"plan": {webtest.FormValue(page, "plan")}, "csrf": {webtest.FormValue(page, "csrf")}, "reason": {"page"}}
	if code, _, page := e.Do(http.MethodPost, "/leaks/streams/fat/release", webtest.Alice, webtest.AlicePass, form); code != 200 {
		t.Fatalf("release: %d\n%.2000s", code, page)
	}
	for _, m := range []string{big, accented, "live-1"} {
		if err := e.Admin.ZScore(ctx, key, m).Err(); err != nil {
			t.Errorf("member of %d bytes gone after the release: %v", len(m), err)
		}
	}
	if err := e.Admin.ZScore(ctx, key, "dead-1").Err(); err != redis.Nil {
		t.Errorf("dead-1 was not released: %v", err)
	}
	b, err := os.ReadFile(e.Audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if len(l) > 4<<10 {
			t.Errorf("an audit line of %d bytes: %.200s", len(l), l)
		}
	}
	if n := len(e.Records()); n != 3 {
		t.Errorf("%d audit records, want 3 (preview, intent, outcome)", n)
	}
}
