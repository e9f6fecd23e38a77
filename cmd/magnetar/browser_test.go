package main

// A real browser for the console's tests: Debian's headless Chromium
// driven over the DevTools protocol (chromedp). The page is driven
// through its data-testid hooks (docs/console-api.md) with small
// JavaScript snippets, which wait and click the way a user would without
// depending on layout. Every console message of level error and every
// uncaught exception is collected; tests fail on them unless they
// provoked them.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium (make test installs it,
// scripts/chromium.sh).
const chromiumPath = "/usr/bin/chromium"

// browserWait bounds how long a test waits for the page to show
// something.
const browserWait = 30 * time.Second

type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	messages []string // errors and exceptions the page logged
	shots    string   // where screenshots go
}

// requireBrowser skips when Chromium is missing, unless
// MAGNETAR_REQUIRE_BROWSER is set (make test sets it): then it fails.
func requireBrowser(t *testing.T) {
	t.Helper()
	skipProcessesIfShort(t)
	if _, err := exec.LookPath(chromiumPath); err != nil {
		if os.Getenv("MAGNETAR_REQUIRE_BROWSER") != "" {
			t.Fatalf("%s is missing and MAGNETAR_REQUIRE_BROWSER is set: install Debian's chromium (scripts/chromium.sh install)", chromiumPath)
		}
		t.Skipf("%s is missing (scripts/chromium.sh install); make test requires it", chromiumPath)
	}
}

// newBrowser starts a headless Chromium with a fresh profile, a
// 1280x800 window, and no network of its own (background networking
// off: this machine refuses it, and the page needs only the broker).
func newBrowser(t *testing.T) *browser {
	t.Helper()
	requireBrowser(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx, shots: os.Getenv("MAGNETAR_CONSOLE_SCREENSHOTS")}
	if b.shots == "" {
		b.shots = t.TempDir()
	}
	messages := chromedp.Console(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == "error" || m.Type == "assert" {
				b.mu.Lock()
				b.messages = append(b.messages, fmt.Sprintf("%s %s (%s:%d)", m.Type, m.Text, m.URL, m.Line+1))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// errors returns and forgets what the page logged as errors.
func (b *browser) errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.messages
	b.messages = nil
	return out
}

// noErrors fails the test on any console error or exception so far.
func (b *browser) noErrors(t *testing.T, where string) {
	t.Helper()
	if errs := b.errors(); len(errs) > 0 {
		t.Errorf("browser console errors %s:\n  %s", where, strings.Join(errs, "\n  "))
	}
}

func (b *browser) open(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

// eval runs a JavaScript expression (a promise is awaited) and decodes
// its JSON value into out (nil: ignored).
func (b *browser) eval(t *testing.T, js string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](`(async () => JSON.stringify(await (async () => (`+js+`))()) ?? "null")()`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		t.Fatalf("evaluate %s: %s: %v", js, raw, err)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			t.Fatalf("evaluate %s: %s: %v", js, text, err)
		}
	}
}

// waitJS waits until the expression is truthy, failing with what after
// browserWait; it returns the expression's last value as text.
func (b *browser) waitJS(t *testing.T, js, what string) string {
	t.Helper()
	deadline := time.Now().Add(browserWait)
	var last any
	for {
		b.eval(t, js, &last)
		if truthy(last) {
			return fmt.Sprint(last)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s (%s was %v); page text: %.600s", browserWait, what, js, last, b.pageText(t))
		}
		time.Sleep(150 * time.Millisecond)
	}
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	}
	return true
}

func (b *browser) pageText(t *testing.T) string {
	t.Helper()
	var s string
	b.eval(t, `document.body ? document.body.innerText : ""`, &s)
	return s
}

// sel is a CSS selector for a data-testid, with an attribute filter.
func sel(testid string, attrs ...string) string {
	s := fmt.Sprintf(`[data-testid="%s"]`, testid)
	for i := 0; i+1 < len(attrs); i += 2 {
		s += fmt.Sprintf(`[%s="%s"]`, attrs[i], attrs[i+1])
	}
	return s
}

// jsq quotes a selector for JavaScript.
func jsq(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// waitFor waits until an element matching selector is shown.
func (b *browser) waitFor(t *testing.T, selector string) {
	t.Helper()
	b.waitJS(t, `(() => { const e = document.querySelector(`+jsq(selector)+`); return !!e && e.getClientRects().length > 0; })()`,
		selector+" shown")
}

// count is how many elements match selector.
func (b *browser) count(t *testing.T, selector string) int {
	t.Helper()
	var n int
	b.eval(t, `document.querySelectorAll(`+jsq(selector)+`).length`, &n)
	return n
}

// text is the text of the first element matching selector ("" if none).
func (b *browser) text(t *testing.T, selector string) string {
	t.Helper()
	var s string
	b.eval(t, `document.querySelector(`+jsq(selector)+`)?.innerText ?? ""`, &s)
	return s
}

// attr is an attribute of the first element matching selector.
func (b *browser) attr(t *testing.T, selector, name string) string {
	t.Helper()
	var s string
	b.eval(t, `document.querySelector(`+jsq(selector)+`)?.getAttribute(`+jsq(name)+`) ?? ""`, &s)
	return s
}

// click clicks the first element matching selector once it is shown.
func (b *browser) click(t *testing.T, selector string) {
	t.Helper()
	b.waitFor(t, selector)
	b.eval(t, `document.querySelector(`+jsq(selector)+`).click()`, nil)
}

// fill sets an input's (or select's) value as typing would: through the
// element's native setter, then input and change events, which is what
// the page's handlers listen to.
func (b *browser) fill(t *testing.T, selector, value string) {
	t.Helper()
	b.waitFor(t, selector)
	b.eval(t, `(() => {
		const e = document.querySelector(`+jsq(selector)+`);
		const proto = e instanceof HTMLSelectElement ? HTMLSelectElement.prototype :
			e instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
		Object.getOwnPropertyDescriptor(proto, "value").set.call(e, `+jsq(value)+`);
		e.dispatchEvent(new Event("input", {bubbles: true}));
		e.dispatchEvent(new Event("change", {bubbles: true}));
	})()`, nil)
}

// screenshot saves the window as name.png in the screenshot directory
// (MAGNETAR_CONSOLE_SCREENSHOTS: docs/console by make console-screenshots).
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, browserWait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
