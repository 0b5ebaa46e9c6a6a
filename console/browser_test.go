package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
	"github.com/acemq-go/acemq/console/internal/testenv"
)

// browser starts Debian's chromium headless with a fresh profile and
// returns a tab; the browser is stopped when the test ends.
func browser(t *testing.T) context.Context {
	t.Helper()
	return browserIn(t, t.TempDir())
}

// browserIn is browser with its profile (--user-data-dir) in dir.
func browserIn(t *testing.T, dir string) context.Context {
	t.Helper()
	path := testenv.Chromium(t)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1300, 1000),
	)
	ctx, cancelTab := chromedp.NewContext(actx)
	// The first run starts the browser and binds it to the context it is
	// given: start it on the tab's own context, not a child with a deadline.
	if err := chromedp.Do(ctx); err != nil {
		cancelTab()
		cancelAlloc()
		t.Fatalf("cannot start %s: %v", path, err)
	}
	t.Cleanup(func() {
		if ctx.Err() == nil { // a test may have closed it already
			_ = chromedp.Cancel(ctx)
		}
		cancelTab()
		cancelAlloc()
	})
	return ctx
}

// within runs f with a deadline of its own, failing the test on an error.
func within(t *testing.T, ctx context.Context, what string, f func(ctx context.Context) error) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("%6.2fs %s", time.Since(start).Seconds(), what) }()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := f(ctx); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitFor polls a JavaScript predicate in the tab.
func waitFor(t *testing.T, ctx context.Context, what, predicate string) {
	t.Helper()
	within(t, ctx, "waiting for "+what, func(ctx context.Context) error {
		var err error
		for {
			_, err = chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(20*time.Second)))
			// A click that navigates destroys the page the poll started in
			// ("Cannot find context", "target navigated"); poll again in
			// the new one. A poll that timed out is final.
			if err == nil || ctx.Err() != nil || strings.Contains(err.Error(), "timeout") {
				break
			}
		}
		if err != nil {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			page, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			return fmt.Errorf("%w; the page:\n%s", err, page)
		}
		return err
	})
}

// shot saves a PNG of the window under dir (and under
// $ACEMQ_CONSOLE_SCREENSHOTS when set, to refresh the README's picture).
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	var png []byte
	within(t, ctx, "screenshot "+name, func(ctx context.Context) (err error) {
		// Right after a navigation the page may have no layout yet ("0
		// width"); wait for it to be complete and try again.
		for range 20 {
			if _, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.readyState === "complete" && document.documentElement.clientWidth > 0`)); err != nil {
				continue
			}
			if png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
				return nil
			}
		}
		return err
	})
	for _, d := range []string{dir, os.Getenv("ACEMQ_CONSOLE_SCREENSHOTS")} {
		if d == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	within(t, ctx, "reading "+sel, func(ctx context.Context) (err error) {
		s, err = chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf("document.querySelector(%q).textContent", sel)))
		return err
	})
	return strings.TrimSpace(s)
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	within(t, ctx, what, func(ctx context.Context) error { return chromedp.Do(ctx, steps...) })
}

// The operator's path through the console in a real browser (on the
// in-process broker, which keeps the test fast; the handler and
// concurrency tests cover RabbitMQ): the overview, a queue of 500 dead letters with three reasons,
// one reason group replayed while a second tab watches the depth fall
// without reloading, the source queue checked, the rest purged after
// typing the queue's name.
func TestBrowserReplayAReasonGroupAndPurgeTheRest(t *testing.T) {
	u := memURL(t)
	f := newFixture(t, u, func(c *console.Config) { c.PageSize = 25 })
	q := seedQueue(t, f.conn)
	dlq := acemq.DeadLetterQueue(q)
	reasons := []string{
		"exhausted 6 attempts: payment gateway timed out after 30s",
		"the handler rejected it: unknown SKU",
		"could not be decoded: unexpected end of JSON input",
	}
	ls := make([]letter, 500)
	for i := range ls {
		ls[i] = letter{reason: reasons[i%5%3], typ: []string{"OrderPlaced", "OrderCancelled"}[i%2], attempt: 1 + i%6}
	}
	t0 := time.Now()
	ids := deadLetter(t, f.conn, dlq, ls...)
	t.Logf("%6.2fs dead-lettering 500", time.Since(t0).Seconds())
	var timeoutIDs []string
	for i, id := range ids {
		if ls[i].reason == reasons[0] {
			timeoutIDs = append(timeoutIDs, id)
		}
	}
	group := "exhausted N attempts: payment gateway timed out after Ns"
	left := 500 - len(timeoutIDs)
	dir := t.TempDir()
	t0 = time.Now()
	tab := browser(t)
	t.Logf("%6.2fs starting the browser", time.Since(t0).Seconds())
	t.Cleanup(func() { t.Logf("finished at %v", time.Now().Format(time.StampMilli)) })

	// The overview.
	row := fmt.Sprintf(`tr[data-queue=%q]`, dlq)
	f.signInBrowser(tab)
	waitFor(t, tab, "the overview to list the queue with its depth", fmt.Sprintf(`(document.querySelector(%q)||{}).textContent === "500"`, row+" td.depth"))
	if got := text(t, tab, row+" td:nth-child(2)"); got != q {
		t.Fatalf("source queue shown as %q, want %q", got, q)
	}
	shot(t, tab, dir, "overview")

	// Drill into the queue: three reason groups.
	do(t, tab, "open the queue", chromedp.Click(row+" a"))
	waitFor(t, tab, "the queue page", `document.querySelector("#groups") !== null && document.querySelector("#matching") !== null`)
	if got := text(t, tab, "#matching"); got != "500" {
		t.Fatalf("the queue page lists %s messages, want 500", got)
	}
	groups := text(t, tab, "#groups tbody")
	for _, want := range []string{group, "the handler rejected it: unknown SKU", "could not be decoded"} {
		if !strings.Contains(groups, want) {
			t.Fatalf("reason groups lack %q: %s", want, groups)
		}
	}
	shot(t, tab, dir, "queue")

	// Filter by the timeout reason.
	do(t, tab, "show the timeout group", chromedp.Click(fmt.Sprintf(`tr[data-group=%q] a.show-group`, group)))
	waitFor(t, tab, "the filtered page", `document.querySelector("#group-shown") !== null`)
	if got := text(t, tab, "#matching"); got != fmt.Sprint(len(timeoutIDs)) {
		t.Fatalf("the group shows %s messages, want %d", got, len(timeoutIDs))
	}
	shot(t, tab, dir, "filtered")

	// A second tab watches the overview; it must not reload.
	watch, cancelWatch := chromedp.NewContext(tab)
	defer cancelWatch()
	if err := chromedp.Do(watch); err != nil {
		t.Fatal(err)
	}
	do(t, watch, "open a second overview", chromedp.Navigate(f.srv.URL+"/"))
	waitFor(t, watch, "the second overview", fmt.Sprintf(`(document.querySelector(%q)||{}).textContent === "500"`, row+" td.depth"))
	do(t, watch, "mark the page", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`window.acemqMark = true`)(ctx, tg)
		return err
	}))

	// Replay the group: the preview first, then the report.
	do(t, tab, "replay the group", chromedp.Click("#replay-all button"))
	waitFor(t, tab, "the preview", `document.querySelector("#plan-count") !== null`)
	if got := text(t, tab, "#plan-count"); got != fmt.Sprint(len(timeoutIDs)) {
		t.Fatalf("the preview plans %s, want %d", got, len(timeoutIDs))
	}
	if plan := text(t, tab, "#plan"); !strings.Contains(plan, "to "+q) {
		t.Fatalf("the preview does not name the target: %s", plan)
	}
	shot(t, tab, dir, "preview")
	do(t, tab, "confirm", chromedp.Click("#confirm-button"))
	waitFor(t, tab, "the report", `document.querySelector("#summary") !== null`)
	if got, want := text(t, tab, "#summary"), fmt.Sprintf("moved %d, skipped %d (drained)", len(timeoutIDs), left); got != want {
		t.Fatalf("report %q, want %q", got, want)
	}
	waitFor(t, tab, "the live depth on the report", fmt.Sprintf(`document.querySelector("#depth").textContent === "%d"`, left))
	shot(t, tab, dir, "replayed")

	// The watching tab saw the depth fall without a reload.
	waitFor(t, watch, "the depth to fall live", fmt.Sprintf(`(document.querySelector(%q)||{}).textContent === "%d"`, row+" td.depth", left))
	waitFor(t, watch, "the same page (no reload)", `window.acemqMark === true`)
	shot(t, watch, dir, "overview-after")

	// The source queue got exactly the timeout group, in order.
	if got := drainIDs(t, f.conn, q); !slices.Equal(got, timeoutIDs) {
		t.Fatalf("%s received %d messages, want exactly the %d of the timeout group", q, len(got), len(timeoutIDs))
	}

	// Purge the rest: the button stays disabled until the name is typed.
	do(t, tab, "back to the queue", chromedp.Click("#back"))
	waitFor(t, tab, "the queue page", `document.readyState === "complete" && document.querySelector("#purge-button") !== null`)
	waitFor(t, tab, "the purge button to start disabled", `document.querySelector("#purge-button").disabled === true`)
	do(t, tab, "type a wrong name", chromedp.SendKeys("#purge-name", q))
	waitFor(t, tab, "the purge button to stay disabled", `document.querySelector("#purge-button").disabled === true`)
	do(t, tab, "type the name", chromedp.SendKeys("#purge-name", ".dlq"))
	waitFor(t, tab, "the purge button to enable", `document.querySelector("#purge-button").disabled === false`)
	shot(t, tab, dir, "purge")
	do(t, tab, "purge", chromedp.Click("#purge-button"))
	waitFor(t, tab, "the purge report", `document.querySelector("#summary") !== null`)
	if got, want := text(t, tab, "#summary"), fmt.Sprintf("purged %d message(s) from %s", left, dlq); got != want {
		t.Fatalf("purge report %q, want %q", got, want)
	}
	if n := depth(t, f.conn, dlq); n != 0 {
		t.Fatalf("%d left in %s after the purge", n, dlq)
	}
	do(t, tab, "open the audit log", chromedp.Navigate(f.srv.URL+"/audit"))
	waitFor(t, tab, "the audit log", `document.querySelector("#audit") !== null`)
	audit := text(t, tab, "#audit tbody")
	if !strings.Contains(audit, "replay") || !strings.Contains(audit, "purge") || !strings.Contains(audit, group) {
		t.Fatalf("audit log: %s", audit)
	}
	shot(t, tab, dir, "audit")
	t.Logf("screenshots in %s", dir)
}
