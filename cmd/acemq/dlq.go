package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/queuelist"
	"github.com/acemq-go/acemq/cmd/acemq/internal/safetext"
	"github.com/acemq-go/acemq/crypto"
	"github.com/acemq-go/acemq/header"
	"github.com/acemq-go/acemq/replay"
	"github.com/acemq-go/acemq/transport"
)

func newDLQ() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, inspect, replay and purge dead-letter queues ({q}.dlq, {q}.parked)",
		Example: `  acemq dlq list
  acemq dlq show orders.new.dlq -n 5
  acemq dlq replay orders.new.dlq --filter 'error ~ "timeout"' --limit 100
  acemq dlq purge orders.new.dlq --yes`,
	}
	cmd.AddCommand(newDLQList(), newDLQShow(), newDLQReplay(), newDLQPurge(), newDLQMigrate())
	return cmd
}

func newDLQList() *cobra.Command {
	var u, mgmt string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every .dlq and .parked queue with its depth",
		Long: "List every .dlq and .parked queue with its depth. RabbitMQ is asked through its management HTTP API " +
			"(AMQP cannot list queues) and each depth from the broker itself; a memory:// broker lives inside one process, so a separate process sees an empty one. " +
			"A depth of 0 from a quorum queue (or stream) is shown only once the management API shows its leader online: while a leader is being elected RabbitMQ answers 0 whatever the queue holds, " +
			"so the depth reads \"unknown\" (--json: messages null, countUnknown saying why) and the command exits 1 saying \"count unknown …; try again\".",
		Example: `  acemq dlq list --url amqp://guest:guest@localhost:5672/
  acemq dlq list --management-url http://guest:guest@localhost:15672/ --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needURL(u); err != nil {
				return err
			}
			all, err := listQueues(cmd.Context(), u, mgmt)
			if err != nil {
				return err
			}
			var dl []listedDepth
			for _, q := range all {
				if isSetAside(q.Name) {
					n := q.Messages
					dl = append(dl, listedDepth{Name: q.Name, Messages: &n})
				}
			}
			var unknown []string
			if len(dl) > 0 && !isMemory(u) {
				// The management API's counts lag by seconds; ask the
				// broker itself for each queue's ready count, and believe
				// a 0 only once its leader is online (replay.Count).
				ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
				defer cancel()
				c, err := connect(ctx, u, "acemq-dlq")
				if err != nil {
					return err
				}
				defer closeConn(c)
				if mgmt == "" {
					mgmt, _ = queuelist.ManagementURL(u)
				}
				manage := replay.ManagementAPI(mgmt, queuelist.VhostOf(u))
				for i := range dl {
					n, err := replay.Count(ctx, c, dl[i].Name, manage)
					var cu *replay.CountUnknownError
					switch {
					case errors.As(err, &cu):
						dl[i].Messages, dl[i].Unknown = nil, strings.TrimSuffix(cu.Why, ".")+"; try again"
						unknown = append(unknown, sentence(err))
					case transport.Code(err) == transport.CodeNotFound:
						// Deleted since it was listed, or a classic queue
						// whose only node is down: no count, but no
						// failure of the list either.
						dl[i].Messages, dl[i].Unknown = nil, "the broker answers that it does not exist: deleted since it was listed, or its only node is down"
					case err != nil:
						dl[i].Messages, dl[i].Unknown = nil, "cannot count it ("+strings.TrimSuffix(sentence(err), ".")+")"
					default:
						dl[i].Messages = &n
					}
				}
			}
			if err := printDepths(cmd.OutOrStdout(), dl, asJSON); err != nil {
				return err
			}
			if len(unknown) > 0 {
				return fmt.Errorf("%s (%d of %d dead-letter queues could not be counted)", strings.TrimSuffix(unknown[0], "."), len(unknown), len(dl))
			}
			return nil
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().StringVar(&mgmt, "management-url", os.Getenv("ACEMQ_MANAGEMENT_URL"), "RabbitMQ management API (default $ACEMQ_MANAGEMENT_URL, else --url's host and credentials on port 15672)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// listedDepth is one row of dlq list: Messages is null (the table says
// "unknown") when a 0 could not be confirmed, and Unknown says why.
type listedDepth struct {
	Name     string `json:"name"`
	Messages *int   `json:"messages"`
	Unknown  string `json:"countUnknown,omitempty"`
}

func printDepths(out io.Writer, dl []listedDepth, asJSON bool) error {
	if asJSON {
		if dl == nil {
			dl = []listedDepth{}
		}
		return writeJSONLine(out, dl)
	}
	if len(dl) == 0 {
		fmt.Fprintln(out, "no dead-letter queues")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tDEPTH")
	for _, q := range dl {
		depth := "unknown"
		if q.Messages != nil {
			depth = strconv.Itoa(*q.Messages)
		}
		fmt.Fprintf(tw, "%s\t%s\n", safetext.Line(q.Name), depth)
	}
	return tw.Flush()
}

// shownMessage is one message as dlq show prints it.
type shownMessage struct {
	ID            string         `json:"id"`
	Type          string         `json:"type"`
	Version       int            `json:"version"`
	CorrelationID string         `json:"correlationId"`
	CausationID   string         `json:"causationId,omitempty"`
	Attempt       int            `json:"attempt"`
	FirstSeen     string         `json:"firstSeen,omitempty"`
	Origin        string         `json:"origin,omitempty"`
	Error         string         `json:"error"`
	RoutingKey    string         `json:"routingKey"`
	ContentType   string         `json:"contentType"`
	Headers       map[string]any `json:"headers"`
	Body          string         `json:"body"`
	Duplicate     bool           `json:"duplicate,omitempty"`
	// UnreadableHeaders are headers the Go AMQP client cannot read, decoded
	// from the bytes AceMQ kept of them; Note says why they are apart.
	UnreadableHeaders map[string]any `json:"unreadableHeaders,omitempty"`
	Note              string         `json:"note,omitempty"`

	raw []byte // the body as it is in the queue, for --raw
}

// decodeBody renders a body for people: a body in one of the codec/
// formats decoded (decodeKnown), otherwise as rawBody does.
func decodeBody(contentType string, b []byte) string {
	if s, ok := decodeKnown(contentType, b, func() string { return rawBody(contentType, b) }); ok {
		return s
	}
	return rawBody(contentType, b)
}

// rawBody renders a body no codec/ format claims: indented JSON, text as
// is, anything else as a hex dump of its start.
func rawBody(contentType string, b []byte) string {
	if strings.Contains(contentType, "json") || json.Valid(b) {
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") == nil {
			return buf.String()
		}
	}
	if utf8.Valid(b) {
		return string(b)
	}
	n := min(len(b), 64)
	return fmt.Sprintf("(%d bytes, %s) % x", len(b), contentType, b[:n])
}

func show(m *acemq.Pulled, dup bool, ring *crypto.Keyring) shownMessage {
	e := m.Envelope
	s := shownMessage{ID: e.ID, Type: e.Type, Version: e.Version, CorrelationID: e.CorrelationID, CausationID: e.CausationID,
		Attempt: e.Attempt, Origin: e.Origin, Error: e.Error, RoutingKey: m.RoutingKey, ContentType: m.ContentType,
		Headers: map[string]any{}, Body: bodyText(m.ContentType, m.Body, ring), Duplicate: dup, raw: m.Body}
	if !e.FirstSeen.IsZero() {
		s.FirstSeen = e.FirstSeen.UTC().Format(time.RFC3339Nano)
	}
	for k, v := range m.Headers {
		if !strings.HasPrefix(k, header.ReservedPrefix) {
			s.Headers[k] = fmt.Sprint(v)
		}
	}
	showUnreadable(&s, m.Headers)
	return s
}

// printShown prints one message as text. Every value a publisher chose is
// escaped by the safetext rule (safetext.Line, the body safetext.Block),
// so nothing in a message acts on the terminal, and ids longer than
// idtext.Max bytes are cut (idLine); --json shows them whole.
func printShown(out io.Writer, s shownMessage) {
	line := safetext.Line
	fmt.Fprintf(out, "--- %s\n", idLine(s.ID))
	fmt.Fprintf(out, "type:        %s (v%d)\n", line(s.Type), s.Version)
	fmt.Fprintf(out, "correlation: %s\n", idLine(s.CorrelationID))
	if s.CausationID != "" {
		fmt.Fprintf(out, "causation:   %s\n", idLine(s.CausationID))
	}
	fmt.Fprintf(out, "attempt:     %d\n", s.Attempt)
	if s.FirstSeen != "" {
		fmt.Fprintf(out, "first seen:  %s\n", s.FirstSeen)
	}
	if s.Origin != "" {
		fmt.Fprintf(out, "origin:      %s\n", line(s.Origin))
	}
	fmt.Fprintf(out, "error:       %s\n", line(s.Error))
	fmt.Fprintf(out, "routing key: %s\n", line(s.RoutingKey))
	fmt.Fprintf(out, "content:     %s\n", line(s.ContentType))
	keys := make([]string, 0, len(s.Headers))
	for k := range s.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "header:      %s = %s\n", line(k), line(fmt.Sprint(s.Headers[k])))
	}
	if s.Note != "" {
		fmt.Fprintf(out, "note:        %s\n", line(s.Note))
		if js, err := json.MarshalIndent(s.UnreadableHeaders, "", "  "); err == nil {
			fmt.Fprintf(out, "unreadable headers (JSON):\n%s\n", jsonSafe(js))
		}
	}
	if s.Duplicate {
		fmt.Fprintln(out, "duplicate:   an earlier message in this queue has the same id; replaying both delivers it twice")
	}
	fmt.Fprintf(out, "body:\n%s\n", safetext.Block(s.Body))
}

// liveQueueHelp is what --live-queue does to the queue, said in its help
// and again on stderr when it is used.
const liveQueueHelp = "each message read is taken and returned, so the broker redelivers it (marked redelivered) " +
	"and a quorum queue adds one to its x-delivery-count; where that counts toward the queue's delivery limit " +
	"(RabbitMQ 4 dead-letters or drops a message after 20 deliveries by default) the read is refused unless --unsafe-read"

func newDLQShow() *cobra.Command {
	var u, keyringPath string
	var rf readFlags
	var n int
	var asJSON, live bool
	var raw rawOutput
	cmd := &cobra.Command{
		Use:   "show QUEUE",
		Short: "Print the first N messages of a .dlq or .parked queue: envelope, error reason, headers, decoded body",
		Long: "Print the first N messages of a .dlq or .parked queue without removing them (each is taken and then returned to the queue): " +
			"envelope fields, the error reason, headers and the decoded body. Messages with an id seen earlier are marked as duplicates. " +
			"Values a publisher chose are shown with control characters and invalid UTF-8 escaped (\\x1b, \\u009b, \\u202e, \\xff); " +
			"--json keeps the values exact in JSON escapes; --raw writes the bodies' bytes as they are. " +
			"Another queue is refused unless --live-queue is given: reading a live queue disturbs it (see --live-queue).",
		Example: `  acemq dlq show orders.new.dlq -n 5
  acemq dlq show orders.new.parked --json
  acemq dlq show orders.new.dlq -n 1 --raw > body.bin
  acemq dlq show orders.new.parked --keyring /etc/acemq/keyring`,
		Args: exactQueueArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return fmt.Errorf("-n must be 1 or more, got %d; pass -n 1 or more", n)
			}
			q := args[0]
			if !isSetAside(q) && !live {
				return fmt.Errorf("%q is not a dead-letter queue (QUEUE.dlq or QUEUE.parked); dlq show reads only those, because on a live queue %s; "+
					"pass --live-queue to read it anyway", q, liveQueueHelp)
			}
			if raw != rawOff && asJSON {
				return errors.New("--raw writes the bodies' bytes and --json writes JSON; pick one")
			}
			if err := raw.check(cmd.OutOrStdout()); err != nil {
				return err
			}
			ring, err := loadShowKeyring(keyringPath)
			if err != nil {
				return err
			}
			if !isSetAside(q) {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: --live-queue: reading %s, which is not a dead-letter queue: %s\n", safetext.Line(q), liveQueueHelp)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			c, err := connect(ctx, u, "acemq-dlq")
			if err != nil {
				return err
			}
			defer closeConn(c)
			opts := rf.options(u)
			depth, err := requireQueue(ctx, c, q, opts...)
			if err != nil {
				return err
			}
			ms, err := peekWithProgress(ctx, c, q, n, depth, nil, ring, opts...)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if raw != rawOff {
				rw := &rawWriter{w: out}
				for _, s := range ms {
					if err := rw.body(s.raw); err != nil {
						return err
					}
				}
				return nil
			}
			if asJSON {
				if ms == nil {
					ms = []shownMessage{}
				}
				return writeJSONLine(out, ms)
			}
			if len(ms) == 0 {
				fmt.Fprintf(out, "%s is empty\n", safetext.Line(q))
			}
			for _, s := range ms {
				printShown(out, s)
			}
			return nil
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().IntVarP(&n, "n", "n", 10, "how many messages to show")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array instead of text (values exact; control characters as JSON \\u escapes)")
	cmd.Flags().BoolVar(&live, "live-queue", false, "read a queue that is not a .dlq or .parked queue: "+liveQueueHelp)
	rawFlag(cmd, &raw, "write only the bodies, as they are in the queue (not decoded or decrypted),")
	keyringFlag(cmd, &keyringPath)
	rf.register(cmd)
	return cmd
}

// peek counts queue and takes up to n messages, returning them all to the
// queue.
func peek(ctx context.Context, c *acemq.Conn, queue string, n int, opts ...replay.Option) ([]shownMessage, error) {
	depth, err := requireQueue(ctx, c, queue, opts...)
	if err != nil {
		return nil, err
	}
	return peekWithProgress(ctx, c, queue, n, depth, nil, nil, opts...)
}

// peekWithProgress takes up to n of the depth messages the command counted
// in queue (requireQueue) and returns them all to the queue, with a
// progress bar on progressOut (nil: none) when more than 100 are to be
// read; ring (nil: none) shows encrypted bodies decrypted. It reads with
// replay.Browse, given depth (replay.Counted) so that the queue is not
// counted again; Browse returns every message it took to the queue, in
// order, and reads nothing where that would count deliveries (opts: the
// management API, --unsafe-read).
func peekWithProgress(ctx context.Context, c *acemq.Conn, queue string, n, depth int, progressOut io.Writer, ring *crypto.Keyring, opts ...replay.Option) ([]shownMessage, error) {
	seen := map[string]bool{}
	var out []shownMessage
	var bar *progress
	if total := min(n, depth); progressOut != nil && total > 100 {
		bar = newProgress(progressOut, "reading "+queue, int64(total))
		defer bar.Done()
	}
	_, err := replay.Browse(ctx, c, queue, n, func(m *acemq.Pulled) bool {
		if bar != nil {
			bar.Add(1)
		}
		out = append(out, show(m, seen[m.Envelope.ID], ring))
		seen[m.Envelope.ID] = true
		return true
	}, append(slices.Clip(opts), replay.Counted(depth))...)
	var unsafe *replay.UnsafeReadError
	switch {
	case errors.As(err, &unsafe):
		return nil, unsafeReadError(err)
	case err != nil:
		return nil, fmt.Errorf("cannot read %q (%s); check the connection and retry", queue, sentence(err))
	}
	return out, nil
}

func exactQueueArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
		return fmt.Errorf("%s needs exactly one queue name; run it as `%s orders.new.dlq`", cmd.CommandPath(), cmd.CommandPath())
	}
	return nil
}

func newDLQReplay() *cobra.Command {
	var u, expr string
	var rf readFlags
	var limit int
	var keep bool
	cmd := &cobra.Command{
		Use:   "replay QUEUE",
		Short: "Move messages from QUEUE (a .dlq or .parked queue) back to its source queue",
		Long: "Move messages from a .dlq or .parked queue back to its source queue through the default exchange. " +
			"Each accepted message is republished with its original bytes and id (headers the Go AMQP client could not read go out as the bytes they were published as), stamped acemq-replayed-from/-at/-count, " +
			"attempt reset to 1 and error cleared (unless --keep-attempts), confirmed, and only then removed from the dead-letter queue. " +
			"Messages the filter declines stay where they are. A count of 0 that cannot be confirmed (a quorum queue whose leader is being elected answers 0) " +
			"moves nothing and exits 1 saying \"count unknown …; try again\", never \"moved 0\". Replayed messages keep their ids: a consumer without an " +
			"idempotency guard may process one twice if it had already handled it.\n\n" + replay.FilterHelp,
		Example: `  acemq dlq replay orders.new.dlq
  acemq dlq replay orders.new.dlq --limit 10 --filter 'type == "OrderPlaced" && error ~ "timeout"'
  acemq dlq replay orders.new.parked --keep-attempts`,
		Args: exactQueueArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !isSetAside(args[0]) {
				return fmt.Errorf("%q is not a dead-letter queue; replay moves messages from QUEUE.dlq or QUEUE.parked back to QUEUE", args[0])
			}
			f, err := replay.ParseFilter(expr)
			if err != nil {
				return err
			}
			if limit < 0 {
				return fmt.Errorf("--limit must be 0 (no limit) or more, got %d; pass --limit 0 or more", limit)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
			defer cancel()
			c, err := connect(ctx, u, "acemq-replay")
			if err != nil {
				return err
			}
			defer closeConn(c)
			errOut := cmd.ErrOrStderr()
			// One count serves the duplicate check, the progress bar and
			// the pass (replay.Counted): two would be two broker round
			// trips and, under load, two answers. A 0 that cannot be
			// confirmed stops here, having moved nothing: an unconfirmed
			// 0 is not "moved 0".
			read := rf.options(u)
			present, err := requireQueue(ctx, c, args[0], read...)
			if err != nil {
				return err
			}
			if dups := duplicateIDs(ctx, c, args[0], present, errOut, read...); len(dups) > 0 {
				fmt.Fprintf(errOut, "warning: %d message id(s) appear more than once in %s (e.g. %s); replaying delivers each copy, so their consumer sees them twice unless it is idempotent\n", len(dups), safetext.Line(args[0]), idLine(dups[0]))
			}
			rep, err := replayQueue(ctx, c, args[0], replayOptions{Limit: limit, Filter: f, KeepAttempts: keep, Progress: errOut, Read: read, Present: &present})
			if err != nil {
				return unsafeReadError(err)
			}
			var unsafe *replay.UnsafeReadError
			if errors.As(rep.Err, &unsafe) {
				return unsafeReadError(rep.Err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", rep)
			if rep.Moved > 0 {
				fmt.Fprintln(errOut, "note: replayed messages keep their ids; a consumer that already handled one and is not idempotent will handle it again")
			}
			if rep.Err != nil {
				return fmt.Errorf("replay stopped after moving %d: %s; the message it was moving is back in %s, fix the cause and run replay again", rep.Moved, strings.TrimSuffix(sentence(rep.Err), "."), args[0])
			}
			return nil
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().IntVar(&limit, "limit", 0, "move at most N messages (0 = all present at the start)")
	cmd.Flags().StringVar(&expr, "filter", "", "only replay messages matching FILTER (see above)")
	cmd.Flags().BoolVar(&keep, "keep-attempts", false, "keep the attempt count and error instead of resetting them")
	rf.register(cmd)
	return cmd
}

func newDLQPurge() *cobra.Command {
	var u, mgmt string
	var yes bool
	cmd := &cobra.Command{
		Use:   "purge QUEUE --yes",
		Short: "Delete every message in a .dlq or .parked queue (asks for --yes)",
		Long: "Delete every message in a .dlq or .parked queue, only with --yes; without it, say how many that would delete. " +
			"The queue is counted first, and a 0 from a quorum queue is believed only once the management API shows its leader online " +
			"(while a leader is being elected RabbitMQ answers 0 whatever the queue holds): when the count cannot be confirmed, " +
			"purge deletes nothing and exits 1 saying \"count unknown …; try again\", with or without --yes.",
		Example: `  acemq dlq purge orders.new.dlq
  acemq dlq purge orders.new.dlq --yes`,
		Args: exactQueueArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			if !isSetAside(q) {
				return fmt.Errorf("%q is not a dead-letter queue; dlq purge only empties QUEUE.dlq or QUEUE.parked queues", q)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			c, err := connect(ctx, u, "acemq-dlq")
			if err != nil {
				return err
			}
			defer closeConn(c)
			// An irreversible step on a count that may be false is not
			// taken: during a leader election a quorum queue counts 0
			// whatever it holds, and a purge then would delete what it
			// had just called nothing (or report "purged 0").
			depth, err := replay.Count(ctx, c, q, managementOptions(u, mgmt)...)
			var unknown *replay.CountUnknownError
			switch {
			case errors.As(err, &unknown):
				return fmt.Errorf("nothing was purged from %s: %s", q, sentence(err))
			case err != nil:
				return countError(q, err)
			}
			if !yes {
				return fmt.Errorf("purging would delete the %d message(s) in %s for good; run again with --yes to confirm (or replay them first)", depth, q)
			}
			n, err := c.PurgeQueue(ctx, q)
			if err != nil {
				return fmt.Errorf("cannot purge %s (%s); check the connection and retry", q, strings.TrimSuffix(sentence(err), "."))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "purged %d message(s) from %s\n", n, q)
			return nil
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().StringVar(&mgmt, "management-url", os.Getenv("ACEMQ_MANAGEMENT_URL"), "RabbitMQ management API, asked whether a count of 0 can be believed (default $ACEMQ_MANAGEMENT_URL, else --url's host and credentials on port 15672)")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm that the messages are to be deleted")
	return cmd
}

// duplicateIDs peeks at up to 1,000 of the present messages the command
// counted in queue (returning them all) and lists ids that occur more than
// once; nil when it cannot tell (it says why on progressOut: a read that
// would count deliveries, a failure).
func duplicateIDs(ctx context.Context, c *acemq.Conn, queue string, present int, progressOut io.Writer, opts ...replay.Option) []string {
	ms, err := peekWithProgress(ctx, c, queue, 1000, present, progressOut, nil, opts...)
	if err != nil {
		fmt.Fprintf(progressOut, "note: duplicate ids not checked: %s\n", safetext.Line(err.Error()))
		return nil
	}
	var dups []string
	for _, m := range ms {
		if m.Duplicate {
			dups = append(dups, m.ID)
		}
	}
	return dups
}
