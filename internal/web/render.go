package web

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/slotexporter/slot_exporter/internal/release"
)

//go:embed templates
var templateFS embed.FS

// pages are the page templates, each with the layout.
var pages = map[string]*template.Template{}

// styleCSS is the pages' style sheet, inlined as the landing page does.
var styleCSS template.CSS

func init() {
	css, err := templateFS.ReadFile("templates/style.css")
	if err != nil {
		panic(err)
	}
	styleCSS = template.CSS(css)
	for _, name := range []string{"leaks", "user", "queue", "preview", "result", "error"} {
		pages[name] = template.Must(template.ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
}

// crumb is one step of the breadcrumb trail; the last has no link.
type crumb struct {
	Text string
	Href string
}

// view is what the layout gets; Page is the page's own model.
type view struct {
	Name   string
	Title  string
	CSS    template.CSS
	Crumbs []crumb
	Page   any
}

// render writes a page. It is rendered into a buffer first, so that a
// template error becomes a 500, not half a page.
func (h *Handler) render(w http.ResponseWriter, status int, page, title string, crumbs []crumb, model any) {
	var buf bytes.Buffer
	err := pages[page].ExecuteTemplate(&buf, "layout", view{Name: h.o.Name, Title: title, CSS: styleCSS, Crumbs: crumbs, Page: model})
	if err != nil {
		h.o.Logger.Error("rendering a page", "page", page, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The pages need no script, no frame and nothing from elsewhere.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type errorPage struct {
	Status  string
	Message string
	Back    string
}

func (h *Handler) fail(w http.ResponseWriter, status int, msg, back string) {
	if status >= 500 {
		h.o.Logger.Log(context.Background(), slog.LevelWarn, "on-call page error", "status", status, "err", msg)
	}
	h.render(w, status, "error", http.StatusText(status), nil, errorPage{Status: strconv.Itoa(status) + " " + http.StatusText(status), Message: msg, Back: back})
}

// shown is how a name from Redis (a user id, a key, a member) is shown:
// as it is when it is printable UTF-8, else Go-quoted, so that invalid
// bytes and control characters are visible rather than mangled. The
// templates escape the result for HTML.
func shown(s string) string {
	if utf8.ValidString(s) {
		printable := true
		for _, r := range s {
			if !unicode.IsPrint(r) && r != ' ' {
				printable = false
				break
			}
		}
		if printable {
			return s
		}
	}
	return strconv.Quote(s)
}

// userLink is the path of a user's page; every part is escaped.
func userLink(family, user string) string {
	return "/leaks/" + pathPart(family) + "/" + pathPart(user)
}

// pathPart escapes one part of a path. A part that is "." or ".." is
// written as %2E each: a browser resolves them as they are (a user ".."
// linked to /leaks/), and the server's router takes the escaped form as
// the name.
func pathPart(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

// fmtDuration writes a duration for a person: milliseconds under a
// minute, seconds above.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + fmtDuration(-d)
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func fmtMs(ms float64) string {
	const year = 365.25 * 24 * 3600 * 1000
	switch {
	case math.IsInf(ms, 0) || math.IsNaN(ms):
		return release.FormatScore(ms) + " ms"
	case math.Abs(ms) >= 10*year:
		// A score in the wrong unit: the order of magnitude is the news.
		return fmt.Sprintf("%s ms (about %.0f years)", release.FormatScore(ms), ms/year)
	}
	return fmtDuration(time.Duration(ms * float64(time.Millisecond)))
}

// fmtTTL writes a PTTL.
func fmtTTL(pttl int64) string {
	switch {
	case pttl == -1:
		return "none (the key never expires)"
	case pttl < 0:
		return "the key is gone"
	}
	return fmtMs(float64(pttl)) + " left"
}

func timeOfMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func joinNames(s []string) string { return strings.Join(s, ", ") }
