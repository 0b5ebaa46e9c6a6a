package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console/internal/safetext"
	"github.com/acemq-go/acemq/replay"
	"github.com/acemq-go/acemq/transport"
)

// row is one message as a queue page lists it. Text from the message is
// escaped (safetext) and clipped; the message page shows it in full.
type row struct {
	Index       int    // position in the queue, from 1
	ID          string // the id the console shows and links (see ids.go)
	NoID        bool   // named by its content: it carries no id of its own
	Type        clipped
	Attempt     int
	FirstSeen   time.Time
	Error       clipped
	Group       string
	Origin      clipped
	Redelivered bool
	Duplicate   bool
	Bytes       int
	Unreadable  bool // headers the Go client could not read (replay.Unreadable)
}

// group is one reason group: reasons that differ only in ids and numbers.
type group struct {
	Key   string
	Count int
	Share float64 // of the messages read
}

// scan is what one read of a queue found.
type scan struct {
	Read     int // messages read
	Depth    int // ready messages when the read began
	Matching []row
	Groups   []group // the five largest, largest first
	Rest     []group // the other groups, largest first
	Others   int     // messages outside the five
	DupIDs   int
}

var (
	uuidRE   = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	hexRE    = regexp.MustCompile(`\b[0-9a-fA-F]{16,}\b`)
	numberRE = regexp.MustCompile(`\d+(\.\d+)?`)
)

// reasonGroup reduces an x-acemq-error reason to its group: ids become
// {id} and numbers N, so "exhausted 6 attempts: timeout after 30s" and
// "exhausted 5 attempts: timeout after 12s" fall together. The group is
// the reason escaped by the one rule (safetext), so it is safe anywhere a
// page puts it, with the ids and numbers replaced in the text only, never
// inside an escape (\x1b stays \x1b, not \xNb).
func reasonGroup(reason string) string {
	if strings.TrimSpace(reason) == "" {
		return "(no reason)"
	}
	var b strings.Builder
	safetext.Segments(reason, func(text string, esc bool) {
		if esc {
			b.WriteString(text)
			return
		}
		text = uuidRE.ReplaceAllString(text, "{id}")
		text = hexRE.ReplaceAllString(text, "{id}")
		b.WriteString(numberRE.ReplaceAllString(text, "N"))
	})
	return b.String()
}

// selection is what an action or a listing applies to: ids, a filter
// expression, a reason group; all empty selects every message.
type selection struct {
	IDs    []string
	Filter string
	Group  string
}

func (s selection) empty() bool { return len(s.IDs) == 0 && s.Filter == "" && s.Group == "" }

// predicate compiles the selection; the error is the filter's own sentence.
// An id selects a message by its own id or by its content id (ids.go); the
// predicate numbers identical messages as it meets them, so it serves one
// pass over a queue, in queue order, once per message.
func (s selection) predicate() (replay.Predicate, error) {
	f, err := replay.ParseFilter(s.Filter)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	byContent := false
	for _, id := range s.IDs {
		ids[id] = true
		byContent = byContent || strings.HasPrefix(id, contentIDPrefix)
	}
	k := newKeyer()
	return func(env acemq.Envelope, body []byte) bool {
		if len(ids) > 0 {
			match := ids[env.ID]
			if byContent {
				// Every message is numbered, matched or not, so the
				// numbers are those a read gives.
				id, _ := k.next(env, body)
				match = match || ids[id]
			}
			if !match {
				return false
			}
		}
		if s.Group != "" && reasonGroup(env.Error) != s.Group {
			return false
		}
		return f == nil || f(env, body)
	}, nil
}

// read browses up to ScanLimit messages of queue under the queue's lock,
// and lists those sel selects. Groups and duplicates are over everything
// read. A read that would count deliveries (replay.Inspect) fails with a
// *replay.UnsafeReadError unless unsafe: the operator asked for it.
func (c *Console) read(ctx context.Context, queue string, sel selection, unsafe bool) (scan, error) {
	keep, err := sel.predicate()
	if err != nil {
		return scan{}, err
	}
	defer c.hold(queue)()
	var sc scan
	// A 0 is confirmed with the management API (replay.Count): a quorum
	// queue whose leader is being elected counts 0 whatever it holds. The
	// read takes this count (replay.Counted) rather than asking again, so
	// the page's depth and what was read are one answer.
	sc.Depth, err = replay.Count(ctx, c.conn, queue, c.readOptions(false)...)
	if err != nil {
		return sc, err
	}
	seen := map[string]int{}
	counts := map[string]int{}
	pos := 0
	k := newKeyer()
	var oldest time.Time
	sc.Read, err = replay.Browse(ctx, c.conn, queue, c.cfg.ScanLimit, func(m *acemq.Pulled) bool {
		pos++
		e := m.Envelope
		g := reasonGroup(e.Error)
		counts[g]++
		cid, _ := k.next(e, m.Body)
		id := shownID(m, cid)
		seen[id]++
		if seen[id] == 2 {
			sc.DupIDs++
		}
		if !e.FirstSeen.IsZero() && (oldest.IsZero() || e.FirstSeen.Before(oldest)) {
			oldest = e.FirstSeen
		}
		if keep(e, m.Body) {
			sc.Matching = append(sc.Matching, row{
				Index: pos, ID: id, NoID: id == cid, Type: clip(e.Type), Attempt: e.Attempt, FirstSeen: e.FirstSeen, Error: clip(e.Error), Group: g,
				Origin: clip(e.Origin), Redelivered: m.Redelivered, Bytes: len(m.Body), Unreadable: replay.Unreadable(m),
			})
		}
		if c.browseHook != nil {
			c.browseHook(queue, pos)
		}
		return true
	}, append(c.readOptions(unsafe), replay.Counted(sc.Depth))...)
	if err != nil {
		return sc, err
	}
	c.noteOldest(queue, oldest, sc.Read, sc.Depth)
	for i := range sc.Matching {
		sc.Matching[i].Duplicate = seen[sc.Matching[i].ID] > 1
	}
	for k, n := range counts {
		sc.Groups = append(sc.Groups, group{Key: k, Count: n, Share: float64(n) / float64(max(sc.Read, 1))})
	}
	sort.Slice(sc.Groups, func(i, j int) bool {
		if sc.Groups[i].Count != sc.Groups[j].Count {
			return sc.Groups[i].Count > sc.Groups[j].Count
		}
		return sc.Groups[i].Key < sc.Groups[j].Key
	})
	if len(sc.Groups) > 5 {
		sc.Rest = sc.Groups[5:]
		for _, g := range sc.Rest {
			sc.Others += g.Count
		}
		sc.Groups = sc.Groups[:5]
	}
	return sc, nil
}

// message is one message in full, as the message page shows it.
type message struct {
	Position    int
	Envelope    acemq.Envelope
	RoutingKey  string
	Exchange    string
	ContentType string
	ReplyTo     string
	Redelivered bool
	Priority    uint8
	// MessageID and CorrelationID are the AMQP properties as received.
	MessageID, CorrelationID string
	Headers                  map[string]any
	Body                     []byte
	ID                       string // the id the console shows (see ids.go)
	NoID                     bool   // named by its content
	Copies                   int    // messages with this id among those read
	Identical                int    // messages identical to it among those read (content ids)
}

// find browses queue for the first message with id, its own or its
// content id (under the queue's lock), and counts its copies among the
// messages read. It reads only where that is safe, unless unsafe (read).
func (c *Console) find(ctx context.Context, queue, id string, unsafe bool) (*message, int, error) {
	defer c.hold(queue)()
	var found *message
	var hash string
	pos := 0
	k := newKeyer()
	n, err := replay.Browse(ctx, c.conn, queue, c.cfg.ScanLimit, func(m *acemq.Pulled) bool {
		pos++
		cid, h := k.next(m.Envelope, m.Body)
		shown := shownID(m, cid)
		if shown != id && !(ownID(m) && m.Envelope.ID == id) {
			return true
		}
		if found != nil {
			found.Copies++
			return true
		}
		found = &message{
			Position: pos, Envelope: m.Envelope, RoutingKey: m.RoutingKey, Exchange: m.Exchange,
			ContentType: m.ContentType, ReplyTo: m.ReplyTo, Redelivered: m.Redelivered, Priority: m.Priority,
			MessageID: m.MessageID, CorrelationID: m.CorrelationID, Headers: m.Headers, Body: m.Body, ID: shown, NoID: shown == cid, Copies: 1,
		}
		hash = h
		return true
	}, c.readOptions(unsafe)...)
	if found != nil && found.NoID {
		found.Identical = k.seen[hash]
	}
	return found, n, err
}

// queueStats is what the overview remembers of a queue between refreshes.
type queueStats struct {
	samples    []sample // depth over the last ten minutes
	oldest     time.Time
	partial    bool // oldest is of the first oldestOf messages only
	oldestOf   int
	oldestRead time.Time // zero: read it at the next refresh
	unread     string    // why the last look did not read the queue ("" when it did)
}

type sample struct {
	at    time.Time
	depth int
}

// overviewRow is one set-aside queue on the overview. Depth is nil when it
// could not be read (Error says why and what to do): unknown is never
// shown as zero.
type overviewRow struct {
	// Name and Source are the real names (a link carries Name
	// percent-encoded); NameParts and SourceParts are how a page shows
	// them, every escape marked (mark.go).
	Name        string  `json:"name"`
	NameParts   []part  `json:"nameParts"`
	Source      string  `json:"source"`
	SourceParts []part  `json:"sourceParts"`
	Kind        string  `json:"kind"` // "dlq" or "parked"
	Depth       *int    `json:"depth"`
	Oldest      string  `json:"oldest"`    // age of the oldest message read, "" when empty or unknown
	PerMinute   float64 `json:"perMinute"` // depth change per minute over the last minute or so
	Growth      string  `json:"growth"`
	Error       string  `json:"error,omitempty"`
	// Unread says why the console does not read the queue by itself: a
	// read there would count deliveries (replay.Access.Why).
	Unread string `json:"unread,omitempty"`
}

// oldestEvery is how often the overview reads a queue again for its
// oldest message.
const oldestEvery = 30 * time.Second

// overview measures every set-aside queue: depth from the broker (exact;
// a 0 it cannot confirm, replay.Count, is a row whose depth is unknown),
// growth from the depths this console saw, and the oldest message's age:
// the earliest first-seen among the first ScanLimit messages (a replayed
// message goes to the back, so the head is not always the oldest), read
// at most every 30 s per queue (and by every queue page), skipped while
// the console is busy with the queue. Rows are sorted by depth, largest
// first; a queue whose depth cannot be read comes first.
func (c *Console) overview(ctx context.Context, req *http.Request) ([]overviewRow, error) {
	names, err := c.listQueues(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	rows := []overviewRow{}
	for _, n := range names {
		if !replay.IsSetAside(n) {
			continue
		}
		r := overviewRow{Name: n, NameParts: parts(n), Source: replay.SourceOf(n), SourceParts: parts(replay.SourceOf(n)), Kind: "dlq"}
		if strings.HasSuffix(n, ".parked") {
			r.Kind = "parked"
		}
		depth, err := replay.Count(ctx, c.conn, n, c.readOptions(false)...)
		if err != nil {
			r.Error = depthError(err)
			rows = append(rows, r)
			continue
		}
		r.Depth = &depth
		st := c.statsFor(n)
		c.statsMu.Lock()
		st.samples = append(st.samples, sample{now, depth})
		for len(st.samples) > 1 && now.Sub(st.samples[0].at) > 10*time.Minute {
			st.samples = st.samples[1:]
		}
		base := st.samples[0]
		for _, s := range st.samples {
			if now.Sub(s.at) >= time.Minute {
				base = s
			}
		}
		refresh := depth > 0 && (st.oldestRead.IsZero() || now.Sub(st.oldestRead) > oldestEvery)
		if depth == 0 {
			st.oldest, st.oldestRead = time.Time{}, time.Time{}
		}
		c.statsMu.Unlock()
		if el := now.Sub(base.at); el >= 5*time.Second {
			r.PerMinute = float64(depth-base.depth) / el.Minutes()
		}
		r.Growth = growthText(r.PerMinute)
		if refresh {
			c.readOldest(ctx, req, n)
		}
		c.statsMu.Lock()
		r.Unread = st.unread
		if !st.oldest.IsZero() && depth > 0 {
			r.Oldest = age(now.Sub(st.oldest))
			if st.partial {
				r.Oldest = fmt.Sprintf("%s (of the first %d)", r.Oldest, st.oldestOf)
			}
		}
		c.statsMu.Unlock()
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if (a.Depth == nil) != (b.Depth == nil) {
			return a.Depth == nil
		}
		if a.Depth != nil && *a.Depth != *b.Depth {
			return *a.Depth > *b.Depth
		}
		if a.PerMinute != b.PerMinute {
			return a.PerMinute > b.PerMinute
		}
		return a.Name < b.Name
	})
	return rows, nil
}

// depthError says why a queue's depth could not be read and what to do.
func depthError(err error) string {
	var unknown *replay.CountUnknownError
	if errors.As(err, &unknown) {
		return fmt.Sprintf("count unknown: %s; this page refreshes every 2 seconds", strings.TrimSuffix(safetext.Line(unknown.Why), "."))
	}
	if transport.Code(err) == transport.CodeNotFound {
		return "the queue no longer exists on the broker (deleted since it was listed); it drops off at the next refresh"
	}
	return fmt.Sprintf("depth unknown: the console cannot reach the broker over AMQP (%s). Check that the broker is up and reachable from the console; the console reconnects by itself and this page refreshes every 2 seconds", strings.TrimPrefix(safetext.Line(err.Error()), "acemq: "))
}

func (c *Console) statsFor(queue string) *queueStats {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	st, ok := c.stats[queue]
	if !ok {
		st = &queueStats{}
		c.stats[queue] = st
	}
	return st
}

// forgetOldest makes the next refresh read queue's oldest message again
// (after an action moved or removed messages).
func (c *Console) forgetOldest(queue string) {
	st := c.statsFor(queue)
	c.statsMu.Lock()
	st.oldestRead = time.Time{}
	c.statsMu.Unlock()
}

// noteOldest records what a read of queue found: the earliest first-seen
// among the read messages, of depth.
func (c *Console) noteOldest(queue string, oldest time.Time, read, depth int) {
	st := c.statsFor(queue)
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	st.oldest, st.oldestRead, st.unread = oldest, time.Now(), ""
	st.partial, st.oldestOf = read < depth, read
}

// readOldest reads the first ScanLimit messages of queue for the earliest
// first-seen, unless the console is busy with the queue (then the last
// value stays), and only where a read is safe: a queue where it would
// count deliveries is never read unasked; its row says why instead. The
// read is audited as r's.
func (c *Console) readOldest(ctx context.Context, r *http.Request, queue string) {
	mu := c.lock(queue)
	if !mu.TryLock() {
		return
	}
	defer mu.Unlock()
	info, err := c.conn.QueueInfo(ctx, queue)
	if err != nil {
		return
	}
	var oldest time.Time
	n, err := replay.Browse(ctx, c.conn, queue, c.cfg.ScanLimit, func(m *acemq.Pulled) bool {
		if f := m.Envelope.FirstSeen; !f.IsZero() && (oldest.IsZero() || f.Before(oldest)) {
			oldest = f
		}
		return true
	}, c.readOptions(false)...)
	var unsafe *replay.UnsafeReadError
	if errors.As(err, &unsafe) {
		c.noteUnread(queue, unsafe.Access.Why)
		return
	}
	if err != nil {
		return
	}
	c.audit.add(r, auditEntry{Action: "read", Queue: queue, Result: fmt.Sprintf("read %d of %d for the overview's oldest", n, info.Messages)})
	c.noteOldest(queue, oldest, n, info.Messages)
}

// noteUnread records why the overview does not read queue.
func (c *Console) noteUnread(queue, why string) {
	st := c.statsFor(queue)
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	st.unread, st.oldestRead = why, time.Now()
}
