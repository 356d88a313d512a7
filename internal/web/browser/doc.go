// Package browser holds the browser tests of the exporter's pages: Debian's
// headless Chromium, driven through chromedp, reads the pages as a person's
// browser renders them, clicks the links and fills in the forms. It is a
// module of its own so that the product's module does not require chromedp;
// its path lies under the product's, so it may import internal/web/webtest.
package browser
