package console

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/acemq-go/acemq/console/internal/safetext"
)

// auditEntry is one action, or one read of a message's content, as the
// audit log records it.
type auditEntry struct {
	Time    time.Time `json:"time"`
	Action  string    `json:"action"`
	Queue   string    `json:"queue"`
	ID      string    `json:"id,omitempty"` // the message read
	User    string    `json:"user,omitempty"`
	Filter  string    `json:"filter,omitempty"`
	Group   string    `json:"group,omitempty"`
	IDs     []string  `json:"ids,omitempty"` // the messages an action selected by id
	Moved   int       `json:"moved"`
	Skipped int       `json:"skipped"`
	Purged  int       `json:"purged"`
	Result  string    `json:"result"`
	Client  string    `json:"client"`
}

// auditLog keeps the last 1,000 entries for the audit page and writes
// each one to w as a JSON line.
type auditLog struct {
	mu      sync.Mutex
	entries []auditEntry
	w       io.Writer
	log     *slog.Logger
	who     func(*http.Request) (client, user string)
}

func (a *auditLog) add(r *http.Request, e auditEntry) {
	e.Time = time.Now().UTC()
	e.Client, e.User = a.who(r)
	e.Queue, e.Filter, e.Group, e.ID, e.Result = safetext.Line(e.Queue), safetext.Line(e.Filter), safetext.Line(e.Group), safetext.Line(e.ID), safetext.Line(e.Result)
	ids := make([]string, len(e.IDs))
	for i, id := range e.IDs {
		ids[i] = safetext.Line(id)
	}
	e.IDs = ids
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, e)
	if len(a.entries) > 1000 {
		a.entries = a.entries[len(a.entries)-1000:]
	}
	if a.w != nil {
		b, _ := json.Marshal(e)
		if _, err := a.w.Write(append(b, '\n')); err != nil {
			a.log.Error("acemq: cannot write the console's audit log; entries stay on the console's audit page only", "err", err)
		}
	}
}

// newestFirst returns a copy of the entries, newest first.
func (a *auditLog) newestFirst() []auditEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]auditEntry, len(a.entries))
	for i, e := range a.entries {
		out[len(out)-1-i] = e
	}
	return out
}
