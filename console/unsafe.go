package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/acemq-go/acemq/console/internal/safetext"
	"github.com/acemq-go/acemq/replay"
)

// A read takes messages and hands them back (replay.Browse). Where that
// would move them toward a delivery limit or hold them back (a quorum
// queue with a limit before RabbitMQ 4.3, say), or where the console
// cannot learn what it would do (no management API), the console reads
// nothing by itself: the page says why and offers "Read anyway", a POST
// with the session's CSRF token, refused on a read-only console, and
// audited either way.

type readAnywayKey struct{}

// readAnywayAsked reports whether r is the operator's "Read anyway".
func readAnywayAsked(r *http.Request) bool {
	v, _ := r.Context().Value(readAnywayKey{}).(bool)
	return v
}

// readAnyway wraps a read page for its POST: the operator confirmed a read
// that counts deliveries. It needs the session's CSRF token and a request
// from the console's own page, and a console that may change the broker.
func (c *Console) readAnyway(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		queue := r.PathValue("queue")
		refuse := func(why, page string) {
			c.audit.add(r, auditEntry{Action: "read anyway", Queue: queue, ID: r.PathValue("id"), Result: "refused: " + why})
			c.errorPage(w, r, http.StatusForbidden, page)
		}
		switch {
		case c.cfg.ReadOnly:
			refuse("the console is read-only", "This console is read-only (--read-only), and reading this queue would change it (see the queue's page); read it from a console that may change the broker, or make the read safe.")
			return
		case r.PostFormValue("unsafe") != "yes":
			refuse("the form did not ask for it", "This request did not ask to read anyway; start from the queue's page.")
			return
		}
		if a := authOf(r); !a.bearer && (a.csrf == "" || !equal(r.PostFormValue("csrf"), a.csrf)) {
			refuse("missing or wrong CSRF token", "This request did not carry the CSRF token of the console's own page; reload the page and try again.")
			return
		}
		if why := crossSite(r); why != "" {
			refuse(why, "This request came from another site ("+why+"), not the console's own page.")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), readAnywayKey{}, true)))
	}
}

// refusedRead answers a read that replay refused as unsafe (err is a
// *replay.UnsafeReadError): the page that says why and offers "Read
// anyway"; the refusal is audited. It reports whether it answered.
func (c *Console) refusedRead(w http.ResponseWriter, r *http.Request, queue, action string, err error) bool {
	var unsafe *replay.UnsafeReadError
	if !errors.As(err, &unsafe) {
		return false
	}
	a := unsafe.Access
	c.audit.add(r, auditEntry{Action: action, Queue: queue, ID: r.PathValue("id"), Result: "not read: " + a.Why})
	depth := -1
	if info, err := c.conn.QueueInfo(r.Context(), queue); err == nil {
		depth = info.Messages
	}
	// The form repeats what the request asked (its query and form) with
	// the CSRF token and unsafe=yes.
	fields := url.Values{}
	_ = r.ParseForm()
	for k, vs := range r.PostForm {
		if k != "csrf" && k != "unsafe" {
			fields[k] = vs
		}
	}
	action2 := c.cfg.BasePath + r.URL.Path
	if r.URL.RawQuery != "" {
		action2 += "?" + r.URL.RawQuery
	}
	var hidden []field
	for k, vs := range fields {
		for _, v := range vs {
			hidden = append(hidden, field{k, v})
		}
	}
	c.render(w, r, http.StatusConflict, "unsafe", "Not read: "+safetext.Line(queue), unsafePage{
		Queue: queue, Why: safetext.Line(a.Why), Broker: safetext.Line(a.Broker), Type: a.Type,
		Limit: a.DeliveryLimit, LimitFrom: safetext.Line(a.LimitFrom), Depth: depth, Action: action2, Fields: hidden,
	})
	return true
}

type field struct{ Name, Value string }

// unsafePage is the data of the page that refuses a read.
type unsafePage struct {
	Queue, Why, Broker, Type, LimitFrom string
	Limit, Depth                        int
	Action                              string // where "Read anyway" posts
	Fields                              []field
}

// readResult is an audited read's result.
func readResult(read, depth int, unsafe bool) string {
	s := fmt.Sprintf("read %d of %d", read, depth)
	if unsafe {
		s += " (read anyway: each message read counted one delivery)"
	}
	return s
}
