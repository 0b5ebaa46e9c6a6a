package console

import (
	"context"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/replay"
)

// row is one message as a queue page lists it.
type row struct {
	Index       int // position in the queue, from 1
	ID          string
	Type        string
	Attempt     int
	FirstSeen   time.Time
	Error       string
	Group       string
	Origin      string
	Redelivered bool
	Duplicate   bool
	Bytes       int
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
// "exhausted 5 attempts: timeout after 12s" fall together.
func reasonGroup(reason string) string {
	if strings.TrimSpace(reason) == "" {
		return "(no reason)"
	}
	s := uuidRE.ReplaceAllString(reason, "{id}")
	s = hexRE.ReplaceAllString(s, "{id}")
	return numberRE.ReplaceAllString(s, "N")
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
func (s selection) predicate() (replay.Predicate, error) {
	f, err := replay.ParseFilter(s.Filter)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, id := range s.IDs {
		ids[id] = true
	}
	return func(env acemq.Envelope, body []byte) bool {
		if len(ids) > 0 && !ids[env.ID] {
			return false
		}
		if s.Group != "" && reasonGroup(env.Error) != s.Group {
			return false
		}
		return f == nil || f(env, body)
	}, nil
}

// read browses up to ScanLimit messages of queue under the queue's lock,
// and lists those sel selects. Groups and duplicates are over everything
// read.
func (c *Console) read(ctx context.Context, queue string, sel selection) (scan, error) {
	keep, err := sel.predicate()
	if err != nil {
		return scan{}, err
	}
	defer c.hold(queue)()
	var sc scan
	info, err := c.conn.QueueInfo(ctx, queue)
	if err != nil {
		return sc, err
	}
	sc.Depth = info.Messages
	seen := map[string]int{}
	counts := map[string]int{}
	pos := 0
	sc.Read, err = replay.Browse(ctx, c.conn, queue, c.cfg.ScanLimit, func(m *acemq.Pulled) bool {
		pos++
		e := m.Envelope
		g := reasonGroup(e.Error)
		counts[g]++
		seen[e.ID]++
		if seen[e.ID] == 2 {
			sc.DupIDs++
		}
		if keep(e, m.Body) {
			sc.Matching = append(sc.Matching, row{
				Index: pos, ID: e.ID, Type: e.Type, Attempt: e.Attempt, FirstSeen: e.FirstSeen, Error: e.Error, Group: g,
				Origin: e.Origin, Redelivered: m.Redelivered, Bytes: len(m.Body),
			})
		}
		if c.browseHook != nil {
			c.browseHook(queue, pos)
		}
		return true
	})
	if err != nil {
		return sc, err
	}
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
		for _, g := range sc.Groups[5:] {
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
	Headers     map[string]any
	Body        []byte
	Copies      int // messages with this id among those read
}

// find browses queue for the first message with id (under the queue's
// lock) and counts its copies among the messages read.
func (c *Console) find(ctx context.Context, queue, id string) (*message, int, error) {
	defer c.hold(queue)()
	var found *message
	pos := 0
	n, err := replay.Browse(ctx, c.conn, queue, c.cfg.ScanLimit, func(m *acemq.Pulled) bool {
		pos++
		if m.Envelope.ID != id {
			return true
		}
		if found != nil {
			found.Copies++
			return true
		}
		found = &message{
			Position: pos, Envelope: m.Envelope, RoutingKey: m.RoutingKey, Exchange: m.Exchange,
			ContentType: m.ContentType, ReplyTo: m.ReplyTo, Redelivered: m.Redelivered, Priority: m.Priority,
			Headers: m.Headers, Body: m.Body, Copies: 1,
		}
		return true
	})
	return found, n, err
}

// queueStats is what the overview remembers of a queue between refreshes.
type queueStats struct {
	samples    []sample // depth over the last ten minutes
	oldest     time.Time
	oldestRead time.Time
	oldestAt   int // depth when oldest was read
}

type sample struct {
	at    time.Time
	depth int
}

// overviewRow is one set-aside queue on the overview.
type overviewRow struct {
	Name      string  `json:"name"`
	Source    string  `json:"source"`
	Kind      string  `json:"kind"` // "dlq" or "parked"
	Depth     int     `json:"depth"`
	Oldest    string  `json:"oldest"`    // age of the head message, "" when empty or unknown
	PerMinute float64 `json:"perMinute"` // depth change per minute over the last minute or so
	Growth    string  `json:"growth"`
	Error     string  `json:"error,omitempty"`
}

// overview measures every set-aside queue: depth from the broker (exact),
// growth from the depths this console saw, and the oldest message's age
// from its head (read with a one-message browse only when the depth
// changed or 30 s passed, and skipped while the queue is busy).
func (c *Console) overview(ctx context.Context) ([]overviewRow, error) {
	names, err := c.listQueues(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var rows []overviewRow
	for _, n := range names {
		if !replay.IsSetAside(n) {
			continue
		}
		r := overviewRow{Name: n, Source: replay.SourceOf(n), Kind: "dlq"}
		if strings.HasSuffix(n, ".parked") {
			r.Kind = "parked"
		}
		info, err := c.conn.QueueInfo(ctx, n)
		if err != nil {
			r.Error = "cannot read the depth: " + err.Error()
			rows = append(rows, r)
			continue
		}
		r.Depth = info.Messages
		st := c.statsFor(n)
		c.statsMu.Lock()
		st.samples = append(st.samples, sample{now, r.Depth})
		for len(st.samples) > 1 && now.Sub(st.samples[0].at) > 10*time.Minute {
			st.samples = st.samples[1:]
		}
		base := st.samples[0]
		for _, s := range st.samples {
			if now.Sub(s.at) >= time.Minute {
				base = s
			}
		}
		refresh := r.Depth > 0 && (st.oldestAt != r.Depth || now.Sub(st.oldestRead) > 30*time.Second)
		if r.Depth == 0 {
			st.oldest = time.Time{}
		}
		c.statsMu.Unlock()
		if el := now.Sub(base.at); el >= 5*time.Second {
			r.PerMinute = float64(r.Depth-base.depth) / el.Minutes()
		}
		r.Growth = growthText(r.PerMinute)
		if refresh {
			c.readOldest(ctx, n, st, r.Depth, now)
		}
		c.statsMu.Lock()
		if !st.oldest.IsZero() && r.Depth > 0 {
			r.Oldest = age(now.Sub(st.oldest))
		}
		c.statsMu.Unlock()
		rows = append(rows, r)
	}
	return rows, nil
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

// readOldest reads the head message's first-seen time, unless the console
// is busy with the queue (then the last value stays).
func (c *Console) readOldest(ctx context.Context, queue string, st *queueStats, depth int, now time.Time) {
	mu := c.lock(queue)
	if !mu.TryLock() {
		return
	}
	defer mu.Unlock()
	var first time.Time
	_, err := replay.Browse(ctx, c.conn, queue, 1, func(m *acemq.Pulled) bool {
		first = m.Envelope.FirstSeen
		return false
	})
	if err != nil {
		return
	}
	c.statsMu.Lock()
	st.oldest, st.oldestRead, st.oldestAt = first, now, depth
	c.statsMu.Unlock()
}
