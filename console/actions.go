package console

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console/internal/safetext"
	"github.com/acemq-go/acemq/replay"
)

// preview is the page an action shows before it acts.
type preview struct {
	Action  string // "replay", "park" or "purge"
	Queue   string
	Target  string
	Sel     selection
	Keep    bool
	Count   int
	Read    int
	Depth   int
	Message string // why the action is not yet done (a wrong name, say)
	// Unreadable counts the selected messages whose headers the Go client
	// could not read: a replay sends them as they were published.
	Unreadable int
	// Unsafe: the operator chose to read anyway where a read counts
	// deliveries; the confirm form carries it on.
	Unsafe bool
}

// outcome is the page an action shows after it acted.
type outcome struct {
	Action  string
	Queue   string
	Target  string
	Summary string
	Error   string
}

// actionContext outlives the request: a closed tab does not stop a
// replay half way.
func (c *Console) actionContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), c.cfg.ActionTimeout)
}

func (c *Console) replayAction(w http.ResponseWriter, r *http.Request) {
	q := r.PathValue("queue")
	c.move(w, r, "replay", q, replay.SourceOf(q))
}

func (c *Console) parkAction(w http.ResponseWriter, r *http.Request) {
	q := r.PathValue("queue")
	if !strings.HasSuffix(q, ".dlq") {
		c.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a .dlq queue; only messages in QUEUE.dlq can be moved to QUEUE.parked.", q))
		return
	}
	c.move(w, r, "park", q, replay.SourceOf(q)+".parked")
}

// move previews, or (with confirm=yes) performs, a replay of the selected
// messages from queue to target with the replay package's rules.
func (c *Console) move(w http.ResponseWriter, r *http.Request, action, queue, target string) {
	if !replay.IsSetAside(queue) {
		c.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a dead-letter queue; actions apply to QUEUE.dlq and QUEUE.parked queues.", queue))
		return
	}
	sel := selectionOf(r)
	keep := r.PostFormValue("keep") == "on" || action == "park"
	pred, err := sel.predicate()
	if err != nil {
		c.errorPage(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := c.actionContext(r)
	defer cancel()
	unsafe := r.PostFormValue("unsafe") == "yes"
	if r.PostFormValue("confirm") != "yes" {
		sc, err := c.read(ctx, queue, sel, unsafe)
		if c.refusedRead(w, r, queue, action+" preview", err) {
			return
		}
		if err != nil {
			c.brokerError(w, r, queue, err)
			return
		}
		c.audit.add(r, auditEntry{Action: action + " preview", Queue: queue, Filter: sel.Filter, Group: sel.Group, IDs: sel.IDs, Result: readResult(sc.Read, sc.Depth, unsafe) + fmt.Sprintf(", %d selected", len(sc.Matching))})
		unreadable := 0
		for _, m := range sc.Matching {
			if m.Unreadable {
				unreadable++
			}
		}
		c.render(w, r, http.StatusOK, "preview", "Preview", preview{Action: action, Queue: queue, Target: target, Sel: sel, Keep: keep,
			Count: len(sc.Matching), Read: sc.Read, Depth: sc.Depth, Unreadable: unreadable, Unsafe: unsafe})
		return
	}
	entry := auditEntry{Action: action, Queue: queue, Filter: sel.Filter, Group: sel.Group, IDs: sel.IDs}
	if _, err := c.conn.QueueInfo(ctx, target); err != nil {
		entry.Result = "failed: the target " + target + " does not exist"
		c.audit.add(r, entry)
		c.render(w, r, http.StatusConflict, "outcome", "Not done", outcome{Action: action, Queue: queue, Target: target,
			Error: fmt.Sprintf("Nothing was moved: %s cannot be read (%s); declare it first (acemq topology apply).", target, strings.TrimPrefix(err.Error(), "acemq: "))})
		return
	}
	opts := append([]replay.Option{replay.ToQueue(target)}, c.readOptions(unsafe)...)
	if !sel.empty() {
		opts = append(opts, replay.Filter(pred))
	}
	if keep {
		opts = append(opts, replay.KeepAttempts())
	}
	release := c.hold(queue)
	rep, err := replay.Queue(ctx, c.conn, queue, opts...)
	release()
	if c.refusedRead(w, r, queue, action, err) {
		return
	}
	entry.Moved, entry.Skipped = rep.Moved, rep.Skipped
	entry.Result = rep.String()
	out := outcome{Action: action, Queue: queue, Target: target, Summary: rep.String()}
	status := http.StatusOK
	if err != nil {
		out.Error = strings.TrimPrefix(safetext.Line(err.Error()), "acemq: ")
		entry.Result += ": " + out.Error
		status = http.StatusBadGateway
	}
	c.audit.add(r, entry)
	c.forgetOldest(queue)
	c.render(w, r, status, "outcome", "Done", out)
}

func (c *Console) purgeAction(w http.ResponseWriter, r *http.Request) {
	queue := r.PathValue("queue")
	if !replay.IsSetAside(queue) {
		c.errorPage(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a dead-letter queue; only QUEUE.dlq and QUEUE.parked queues can be purged here.", queue))
		return
	}
	ctx, cancel := c.actionContext(r)
	defer cancel()
	if r.PostFormValue("confirm_name") != queue {
		info, err := c.conn.QueueInfo(ctx, queue)
		if err != nil {
			c.brokerError(w, r, queue, err)
			return
		}
		msg := ""
		if r.PostFormValue("confirm_name") != "" {
			msg = "The name typed was not " + queue + "; nothing was deleted."
		}
		c.render(w, r, http.StatusBadRequest, "preview", "Preview", preview{Action: "purge", Queue: queue, Count: info.Messages, Depth: info.Messages, Message: msg})
		return
	}
	release := c.hold(queue)
	n, err := c.conn.PurgeQueue(ctx, queue)
	release()
	entry := auditEntry{Action: "purge", Queue: queue, Purged: n, Result: fmt.Sprintf("purged %d", n)}
	out := outcome{Action: "purge", Queue: queue, Summary: fmt.Sprintf("purged %d message(s) from %s", n, queue)}
	status := http.StatusOK
	if err != nil {
		out.Error = strings.TrimPrefix(safetext.Line(err.Error()), "acemq: ")
		entry.Result = "failed: " + out.Error
		status = http.StatusBadGateway
	}
	c.audit.add(r, entry)
	c.forgetOldest(queue)
	c.render(w, r, status, "outcome", "Done", out)
}

// downloaded is one message as a JSON line of a download.
type downloaded struct {
	ID            string            `json:"id"` // a content id ("content-…") when the message carries none
	Type          string            `json:"type"`
	Version       int               `json:"version"`
	CorrelationID string            `json:"correlationId"`
	CausationID   string            `json:"causationId,omitempty"`
	Attempt       int               `json:"attempt"`
	FirstSeen     string            `json:"firstSeen,omitempty"`
	Origin        string            `json:"origin,omitempty"`
	Error         string            `json:"error"`
	Exchange      string            `json:"exchange"`
	RoutingKey    string            `json:"routingKey"`
	ContentType   string            `json:"contentType"`
	Redelivered   bool              `json:"redelivered"`
	Headers       map[string]string `json:"headers"`
	Body          *string           `json:"body,omitempty"`
	BodyBase64    string            `json:"bodyBase64,omitempty"`
}

// downloadAction sends the selected messages (every one in the queue,
// not only the first ScanLimit) as JSON lines. The messages are read and
// returned first; writing the response holds none of them.
func (c *Console) downloadAction(w http.ResponseWriter, r *http.Request) {
	queue := r.PathValue("queue")
	sel := selectionOf(r)
	keep, err := sel.predicate()
	if err != nil {
		c.errorPage(w, r, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := c.actionContext(r)
	defer cancel()
	release := c.hold(queue)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	count := 0
	k := newKeyer()
	info, err := c.conn.QueueInfo(ctx, queue)
	unsafe := r.PostFormValue("unsafe") == "yes"
	if err == nil {
		_, err = replay.Browse(ctx, c.conn, queue, info.Messages, func(m *acemq.Pulled) bool {
			cid, _ := k.next(m.Envelope, m.Body)
			if keep(m.Envelope, m.Body) {
				count++
				_ = enc.Encode(toDownloaded(m, shownID(m, cid)))
			}
			return true
		}, c.readOptions(unsafe)...)
	}
	release()
	if c.refusedRead(w, r, queue, "download", err) {
		return
	}
	if err != nil {
		c.brokerError(w, r, queue, err)
		return
	}
	c.audit.add(r, auditEntry{Action: "download", Queue: queue, Filter: sel.Filter, Group: sel.Group, IDs: sel.IDs, Result: fmt.Sprintf("downloaded %d", count)})
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", safeFileName(queue)+".jsonl"))
	_, _ = w.Write(buf.Bytes())
}

// toDownloaded is m as a download line; id is the id the console shows
// (its content id when it carries none of its own).
func toDownloaded(m *acemq.Pulled, id string) downloaded {
	e := m.Envelope
	d := downloaded{ID: id, Type: e.Type, Version: e.Version, CorrelationID: e.CorrelationID, CausationID: e.CausationID,
		Attempt: e.Attempt, Origin: e.Origin, Error: e.Error, Exchange: m.Exchange, RoutingKey: m.RoutingKey,
		ContentType: m.ContentType, Redelivered: m.Redelivered, Headers: map[string]string{}}
	if !e.FirstSeen.IsZero() {
		d.FirstSeen = e.FirstSeen.UTC().Format(time.RFC3339Nano)
	}
	for k, v := range m.Headers {
		d.Headers[k] = strings.TrimPrefix(formatValue(v, ""), "\n")
	}
	if utf8.Valid(m.Body) {
		s := string(m.Body)
		d.Body = &s
	} else {
		d.BodyBase64 = base64.StdEncoding.EncodeToString(m.Body)
	}
	return d
}
