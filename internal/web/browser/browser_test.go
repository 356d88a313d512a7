package browser

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/kind"
	"github.com/slotexporter/slot_exporter/internal/release"
	"github.com/slotexporter/slot_exporter/internal/web/webtest"
)

// The browser tests drive Debian's headless Chromium through chromedp:
// the pages are read as a person's browser renders them, links are
// clicked and forms filled in.

// chromium finds the browser, or fails with what to do about it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: the browser tests need Debian's chromium package; `make test` installs it (scripts/install-deps.sh), or run apt-get install chromium")
	return ""
}

// browser starts a headless Chromium with a fresh profile that sends
// user's basic-auth credentials with every request.
func browser(t *testing.T, user, pass string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// memberStates reads the member table of a user page as the browser
// shows it: member name to state.
func memberStates(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	rows := run(t, ctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll('section table tbody tr')).map(r => [r.cells[0].textContent, r.cells[1].textContent.trim()])`))
	out := map[string]string{}
	for _, r := range rows {
		out[r[0]] = r[1]
	}
	return out
}

// directStates reads a key straight from Redis and classifies its members
// with the family's rules, as the exporter does, untracked (first seen
// now).
func directStates(e *webtest.Env, family, key string) map[string]string {
	e.T.Helper()
	var f = e.Cfg.Families[0]
	for _, fam := range e.Cfg.Families {
		if fam.Name == family {
			f = fam
		}
	}
	zs, err := e.Admin.ZRangeWithScores(context.Background(), key, 0, -1).Result()
	if err != nil {
		e.T.Fatal(err)
	}
	now := e.Now()
	rules := kind.Rules(&f)
	b := rules.Bounds(now)
	out := map[string]string{}
	for _, z := range zs {
		out[z.Member.(string)] = rules.Classify(&b, z.Score, now, now).String()
	}
	return out
}

// pageChecks are what every page must satisfy, whatever it shows: no
// script, one main, labelled inputs, scoped table headers, and nothing
// wider than the window.
const pageChecks = `(() => {
  const problems = [];
  if (document.querySelectorAll('script').length) problems.push('a script element');
  if (document.querySelectorAll('main').length !== 1) problems.push('not one main');
  for (const el of document.querySelectorAll('input:not([type=hidden]), textarea'))
    if (!el.labels || !el.labels.length) problems.push('an input without a label: ' + el.name);
  for (const th of document.querySelectorAll('thead th'))
    if (th.getAttribute('scope') !== 'col') problems.push('a th without scope: ' + th.textContent);
  if (document.documentElement.scrollWidth > window.innerWidth + 1)
    problems.push('wider than the window: ' + document.documentElement.scrollWidth + ' > ' + window.innerWidth);
  return problems;
})()`

func checkPage(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	if problems := run(t, ctx, chromedp.Evaluate[[]string](pageChecks)); len(problems) > 0 {
		t.Errorf("%s: %v", what, problems)
	}
}

// screenshot saves a full-page PNG into the test's directory and, when
// SCREENSHOT_DIR is set, there too.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png := run(t, ctx, chromedp.FullScreenshot(100))
	path := filepath.Join(t.TempDir(), name)
	exportertest.Must(t, os.WriteFile(path, png, 0o644))
	if dir := os.Getenv("SCREENSHOT_DIR"); dir != "" {
		exportertest.Must(t, os.MkdirAll(dir, 0o755))
		exportertest.Must(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}
	return path
}

// TestBrowserLeakingUser: a leaking user is on /leaks; clicking it shows
// member states that match a direct read of Redis classified by the same
// rules. Screenshots of both pages, wide and phone-sized.
func TestBrowserLeakingUser(t *testing.T) {
	e := webtest.New(t, webtest.Options{Release: true})
	key := e.SeedLeaky("leaky")
	// A member name no screen is wide enough for: it wraps, the page
	// does not grow sideways.
	e.Admin.ZAdd(context.Background(), key, redis.Z{Score: float64(e.Now() + 100_000), Member: "holder-" + strings.Repeat("0123456789", 15)})
	e.Admin.ZAdd(context.Background(), "joishi:streams:{calm}", redis.Z{Score: float64(e.Now() + 110_000), Member: "live-9"})
	e.H.Sweep()
	ctx := browser(t, webtest.Alice, webtest.AlicePass)

	exportertest.Must(t, chromedp.Do(ctx, chromedp.Navigate(e.Base+"/")))
	exportertest.Must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[href="/leaks"]`)), chromedp.WaitVisible(chromedp.CSS(`#family-streams`))))
	checkPage(t, ctx, "/leaks")
	users := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('section[aria-labelledby=family-streams] tbody td:first-child')).map(td => td.textContent)`))
	if len(users) == 0 || users[0] != "leaky" {
		t.Fatalf("/leaks lists %v for streams, want leaky first (anomalies first)", users)
	}
	anomalies := run(t, ctx, chromedp.Evaluate[string](`document.querySelector('section[aria-labelledby=family-streams] tbody tr td:last-child').textContent`))
	for _, a := range []string{"expired", "future", "stale"} {
		if !strings.Contains(anomalies, a) {
			t.Errorf("leaky's anomalies %q lack %s", anomalies, a)
		}
	}
	screenshot(t, ctx, "leaks.png")

	exportertest.Must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a[href="/leaks/streams/leaky"]`)), chromedp.WaitVisible(chromedp.CSS(`section table`))))
	if loc := run(t, ctx, chromedp.Location()); loc != e.Base+"/leaks/streams/leaky" {
		t.Errorf("clicked to %s", loc)
	}
	checkPage(t, ctx, "the user page")
	got, want := memberStates(t, ctx), directStates(e, "streams", key)
	if !maps.Equal(got, want) {
		t.Errorf("the page shows %v, a direct read classifies %v", got, want)
	}
	var states []string
	for _, s := range got {
		states = append(states, s)
	}
	slices.Sort(states)
	if !slices.Equal(slices.Compact(states), []string{"expired", "future", "live", "stale"}) {
		t.Errorf("states shown %v: the fixture should show every state but zombie", states)
	}
	screenshot(t, ctx, "user.png")

	// A phone: nothing wider than the screen, every cell labelled.
	exportertest.Must(t, chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Reload()))
	exportertest.Must(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`section table`))))
	checkPage(t, ctx, "the user page on a phone")
	screenshot(t, ctx, "user-phone.png")
}

// TestBrowserRelease: the whole release in the browser: preview, reason,
// confirm. Dead members leave Redis, the live one stays, a member whose
// heartbeat arrives between the preview and the confirmation stays, and
// the audit file names the operator.
func TestBrowserRelease(t *testing.T) {
	e := webtest.New(t, webtest.Options{Release: true})
	key := e.SeedLeaky("leaky")
	e.H.Sweep()
	ctx := browser(t, webtest.Alice, webtest.AlicePass)

	exportertest.Must(t, chromedp.Do(ctx, chromedp.Navigate(e.Base+"/leaks/streams/leaky"), chromedp.WaitVisible(chromedp.CSS(`a.button`))))
	exportertest.Must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`a.button`)), chromedp.WaitVisible(chromedp.ID("reason"))))
	checkPage(t, ctx, "the preview")
	removing := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('table')[0].querySelectorAll('tbody tr td:first-child')).map(td => td.textContent)`))
	slices.Sort(removing)
	if !slices.Equal(removing, []string{"crashed-1", "future-1", "stale-1", "stale-2"}) {
		t.Fatalf("the preview would remove %v", removing)
	}
	screenshot(t, ctx, "preview.png")

	// stale-2's holder was only slow: its heartbeat lands now.
	e.Admin.ZAddXX(context.Background(), key, redis.Z{Score: float64(e.Now() + 120_000), Member: "stale-2"})

	exportertest.Must(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("reason"), "night page: leaky's holders crashed"),
		chromedp.Click(chromedp.CSS(`form.release button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.ok`)),
	))
	summary := run(t, ctx, chromedp.Text(chromedp.CSS(`p.ok`)))
	if !strings.Contains(summary, "3 removed or set, 1 kept") {
		t.Errorf("result summary %q", summary)
	}
	left, err := e.Admin.ZRange(context.Background(), key, 0, -1).Result()
	exportertest.Must(t, err)
	slices.Sort(left)
	if !slices.Equal(left, []string{"live-1", "stale-2"}) {
		t.Errorf("left in Redis: %v, want [live-1 stale-2]", left)
	}
	recs := e.Records()
	last := recs[len(recs)-1]
	if last.Action != release.ActionRelease || last.Result != release.ResultReleased || last.Operator != webtest.Alice ||
		last.Reason != "night page: leaky's holders crashed" || last.Source != "web" {
		t.Errorf("audit line %+v", last)
	}
	for _, it := range last.Items {
		if it.Member == "stale-2" && it.Outcome != release.KeptMoved {
			t.Errorf("stale-2 audited as %s, want %s", it.Outcome, release.KeptMoved)
		}
	}
	screenshot(t, ctx, "released.png")
}

// TestBrowserHostileUserIDs: user ids that are markup, quotes or invalid
// UTF-8 render as text; the pages keep their structure and every link
// reaches its user.
func TestBrowserHostileUserIDs(t *testing.T) {
	e := webtest.New(t, webtest.Options{Release: true})
	hostile := map[string]string{ // id -> how the page shows it
		`<script>alert(1)</script>`: `<script>alert(1)</script>`,
		`"quoted' & <b>bold</b>`:    `"quoted' & <b>bold</b>`,
		"\xff\xfe bad":              `"\xff\xfe bad"`,
		"tab\there":                 `"tab\there"`,
	}
	for id := range hostile {
		e.SeedLeaky(id)
	}
	e.H.Sweep()
	ctx := browser(t, webtest.Alice, webtest.AlicePass)
	exportertest.Must(t, chromedp.Do(ctx, chromedp.Navigate(e.Base+"/leaks"), chromedp.WaitVisible(chromedp.CSS(`#family-streams`))))
	checkPage(t, ctx, "/leaks with hostile ids")
	shownOnLeaks := run(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('section[aria-labelledby=family-streams] tbody td:first-child a')).map(a => a.textContent)`))
	var want []string
	for _, s := range hostile {
		want = append(want, s)
	}
	slices.Sort(want)
	slices.Sort(shownOnLeaks)
	if !slices.Equal(shownOnLeaks, want) {
		t.Errorf("/leaks shows %q, want %q", shownOnLeaks, want)
	}
	for id, shown := range hostile {
		// The link escapes every part of the path.
		href := "/leaks/streams/" + url.PathEscape(id)
		exportertest.Must(t, chromedp.Do(ctx, chromedp.Navigate(e.Base+"/leaks"), chromedp.WaitVisible(chromedp.CSS(`#family-streams`))))
		exportertest.Must(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[href=%q]`, href))), chromedp.WaitVisible(chromedp.CSS(`section table`))))
		checkPage(t, ctx, "the page of "+shown)
		title := run(t, ctx, chromedp.Text(chromedp.CSS(`main h2`)))
		if title != "streams: user "+shown {
			t.Errorf("heading %q, want %q", title, "streams: user "+shown)
		}
		if n := len(memberStates(t, ctx)); n != 5 {
			t.Errorf("%s: %d members shown, want 5", shown, n)
		}
		if loc, _ := url.PathUnescape(run(t, ctx, chromedp.Location())[len(e.Base):]); loc != "/leaks/streams/"+id {
			t.Errorf("link went to %q", loc)
		}
	}
}
