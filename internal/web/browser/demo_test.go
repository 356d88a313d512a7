package browser

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/slotexporter/slot_exporter/internal/exportertest"
	"github.com/slotexporter/slot_exporter/internal/redisproc"
	"github.com/slotexporter/slot_exporter/internal/release"
)

// TestBrowserDemoRelease: in `--demo`, a person reads the login on the
// landing page, takes the password the log printed once, previews a
// release in headless Chromium and confirms it, and the audit file the log
// named holds the line. Without the login the release pages refuse; the
// rest of the demo opens without one. It runs the binary a user builds,
// as a user starts it.
func TestBrowserDemoRelease(t *testing.T) {
	chromium := chromium(t)
	dir := t.TempDir()
	bins, err := redisproc.BuildBinaries(context.Background(), dir, ".")
	if err != nil {
		t.Fatal(err)
	}
	port, err := redisproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	logs := &exportertest.Buffer{}
	cmd := exec.Command(bins[0], "--demo", fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logs, logs
	// The demo needs nothing from the environment: none of the settings
	// that configure a real exporter leak in from the test's.
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "REDIS_ADDR", "REDIS_USER", "REDIS_PASSWORD", "REDIS_PASSWORD_FILE", "SLOT_EXPORTER_CONFIG":
		case "TMPDIR":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// A demo killed by a failing test leaves its folder under the test's.
	cmd.Env = append(cmd.Env, "TMPDIR="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("exporter log:\n%s", logs.String())
		}
	})
	// The deadline only ends a hung test.
	exportertest.WaitFor(t, 3*time.Minute, "the demo serving", func() bool {
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	login := regexp.MustCompile(`msg="demo: release is on[^"]*" user=(\S+) password=([0-9a-f]+) audit_file=(\S+)`).FindStringSubmatch(logs.String())
	if login == nil {
		t.Fatalf("the log does not print the demo's login:\n%s", logs.String())
	}
	user, pass, audit := login[1], login[2], login[3]
	if n := strings.Count(logs.String(), pass); n != 1 {
		t.Errorf("the password is in the log %d times, want once", n)
	}

	for path, want := range map[string]int{"/metrics": 200, "/leaks": 200, "/leaks/streams/u-micros/preview": 401} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s without a login: %d, want %d", path, resp.StatusCode, want)
		}
	}

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(t.TempDir()))
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(alloc)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`p.login-hint`))); err != nil {
		t.Fatalf("landing page: %v", err)
	}
	hint, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.login-hint`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(hint, `"`+user+`"`) || !strings.Contains(hint, "password") || !strings.Contains(hint, audit) {
		t.Errorf("the landing page does not say how to log in: %q", hint)
	}

	// The person logs in: the browser sends the credentials from now on.
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": auth}}); err != nil {
		t.Fatal(err)
	}
	// The demo loses its data 35 s in (a simulated restart), and on a busy
	// machine the browser can still be on its way then: the user page shows
	// no member until the demo writes it again a second later, and a
	// release previewed before the loss is refused, rightly, since the key
	// changed under it. Either is the demo keeping its word, so the person
	// starts over; a refusal with no data loss in between fails the test.
	losses := func() int {
		return strings.Count(logs.String(), "demo: simulated a Redis restart") + strings.Count(logs.String(), "demo: simulated a FLUSHALL")
	}
	for attempt := 1; ; attempt++ {
		lost := losses()
		refusal, err := releaseInBrowser(t, ctx, base+"/leaks/streams/u-micros", "score-in-microseconds", "demo: trying the release button")
		if err != nil {
			t.Fatalf("preview and release in the browser (attempt %d): %v", attempt, err)
		}
		if refusal == "" {
			break
		}
		if losses() == lost {
			t.Fatalf("preview and release in the browser (attempt %d): refused with no data loss in between: %s", attempt, refusal)
		}
		t.Logf("attempt %d: the demo lost its data on the way (%s); starting over", attempt, refusal)
	}
	summary, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`p.ok`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(summary, "1 removed") {
		t.Errorf("result %q, want the member removed", summary)
	}
	var preview, released bool
	for _, r := range exportertest.JSONLines[release.Record](t, audit) {
		if r.User != "u-micros" || r.Operator != user || r.Source != "web" {
			continue
		}
		preview = preview || r.Action == release.ActionPreview
		released = released || r.Action == release.ActionRelease && r.Result == release.ResultReleased && r.Reason == "demo: trying the release button"
	}
	if !preview || !released {
		t.Errorf("audit file %s: preview line %v, release line %v; want both, by %s", audit, preview, released, user)
	}
	// Stopped as a person stops it, the demo takes its folder (the
	// passwords, the audit file) with it.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the demo, interrupted: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(audit)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the demo's folder %s is still there after it stopped (%v)", filepath.Dir(audit), err)
	}
}

// releaseInBrowser opens a user page, previews the release of its member
// and confirms it, as a person would. It returns the page's warning if the
// exporter refused on the way, and an error if the browser got stuck.
func releaseInBrowser(t *testing.T, ctx context.Context, userPage, member, reason string) (refusal string, err error) {
	step := func(what string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(context.Context, *chromedp.Target) error {
			t.Logf("browser: %s", what)
			return nil
		})
	}
	// The user page reads Redis when it is served, so a person reloads it
	// until it names the member: the demo writes u-micros a second after
	// it starts and again a second after each data loss, and the page is
	// rate-limited (429 for a second after another live read).
	for {
		if err := chromedp.Do(ctx,
			step("opening "+userPage),
			chromedp.Navigate(userPage),
			chromedp.WaitReady(chromedp.CSS(`body`)),
		); err != nil {
			return "", err
		}
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("a.button") ? document.body.innerText : ""`))
		if err != nil {
			return "", err
		}
		if strings.Contains(shown, member) {
			break
		}
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Logf("browser: the page does not offer %s yet; reloading in a second: %.300q", member, page)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err := chromedp.Do(ctx,
		step("previewing"),
		chromedp.Click(chromedp.CSS(`a.button`)),
		chromedp.WaitVisible(chromedp.CSS(`#reason, p.warn`)),
	); err != nil {
		return "", err
	}
	// A preview with nothing to release has no reason field, only its
	// warning.
	if w, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("reason") ? "" : document.querySelector("p.warn").textContent`)); w != "" || err != nil {
		return w, err
	}
	if err := chromedp.Do(ctx,
		step("confirming"),
		chromedp.SendKeys(chromedp.ID("reason"), reason),
		chromedp.Click(chromedp.CSS(`form.release button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.ok, p.warn`)),
		step("result shown"),
	); err != nil {
		return "", err
	}
	return chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("p.warn")?.textContent ?? ""`))
}
