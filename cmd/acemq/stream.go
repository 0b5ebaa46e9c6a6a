package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/cmd/acemq/internal/queuelist"
	"github.com/acemq-go/acemq/cmd/acemq/internal/redact"
	"github.com/acemq-go/acemq/cmd/acemq/internal/safetext"
	"github.com/acemq-go/acemq/stream"
	"github.com/acemq-go/acemq/transport"
)

func newStream() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stream",
		Short: "Read and inspect streams (retained logs)",
		Long:  "Read and inspect streams: tail prints messages from any position with their offsets, info shows retention and size. Nothing is removed from a stream by reading it.",
		Example: `  acemq stream tail orders.history --from first -n 10
  acemq stream tail orders.history --from 2026-12-01T10:00:00Z
  acemq stream info orders.history`,
	}
	cmd.AddCommand(newStreamTail(), newStreamInfo())
	return cmd
}

// streamLine is one stream message as stream tail prints it.
type streamLine struct {
	Offset        int64  `json:"offset"`
	ID            string `json:"id"`
	Type          string `json:"type"`
	CorrelationID string `json:"correlationId"`
	FirstSeen     string `json:"firstSeen,omitempty"`
	RoutingKey    string `json:"routingKey"`
	ContentType   string `json:"contentType"`
	Body          string `json:"body"`
}

func newStreamTail() *cobra.Command {
	var u, from string
	var n int
	var dur time.Duration
	var raw rawOutput
	cmd := &cobra.Command{
		Use:   "tail STREAM",
		Short: "Print a stream's messages from a position, one JSON line each with its offset",
		Long: "Print a stream's messages from a position (--from first, last, next, an offset, an RFC 3339 time, " +
			"or how far back such as 90m), one JSON line each with its offset. Reading removes nothing. " +
			"Without -n or --for it follows the stream until interrupted. The JSON lines keep every value exact, with control " +
			"characters as JSON \\u escapes, so they are safe on a terminal; --raw writes the bodies' bytes instead.",
		Example: `  acemq stream tail orders.history --from first -n 100
  acemq stream tail orders.history --from 1500 -n 1 --raw > body.bin
  acemq stream tail orders.history --from 1500
  acemq stream tail orders.history --from 30m --for 10s`,
		Args: exactStreamArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 0 {
				return fmt.Errorf("-n must be 0 (no limit) or more, got %d; pass -n 0 or more", n)
			}
			if err := raw.check(cmd.OutOrStdout()); err != nil {
				return err
			}
			pos, err := stream.ParsePosition(from)
			if err != nil {
				return fmt.Errorf("--from: %s", sentence(err))
			}
			name := args[0]
			ctx, cancel := context.WithCancel(cmd.Context())
			if dur > 0 {
				ctx, cancel = context.WithTimeout(cmd.Context(), dur)
			}
			defer cancel()
			c, err := connect(ctx, u, "acemq-stream-tail")
			if err != nil {
				return err
			}
			defer closeConn(c)
			if err := requireStream(ctx, c, name); err != nil {
				return err
			}
			return tailStream(ctx, c, name, pos, n, cmd.OutOrStdout(), raw != rawOff)
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().StringVar(&from, "from", "last", "where to start: first, last, next, an offset, an RFC 3339 time, or how far back (90m)")
	cmd.Flags().IntVarP(&n, "n", "n", 0, "stop after N messages (0 = no limit)")
	cmd.Flags().DurationVar(&dur, "for", 0, "stop after this long (0 = until interrupted or -n is reached)")
	rawFlag(cmd, &raw, "write only the bodies")
	return cmd
}

// tailStream subscribes at pos and prints up to n messages (0: until ctx
// ends). Every delivery is acknowledged: on a stream that only returns
// credit. With raw it writes only the bodies (rawWriter), otherwise one
// terminal-safe JSON line each.
func tailStream(ctx context.Context, c *acemq.Conn, name string, pos stream.Position, n int, out io.Writer, raw bool) error {
	ch, err := c.Channel(ctx)
	if err != nil {
		return fmt.Errorf("cannot open a channel to read %q (%s); check the connection and retry", name, sentence(err))
	}
	defer ch.Close()
	if err := ch.Qos(100); err != nil {
		return fmt.Errorf("cannot set the prefetch on %q (%s); check the connection and retry", name, sentence(err))
	}
	deliveries, err := ch.Consume(ctx, transport.ConsumeSpec{Queue: name, Tag: "acemq-stream-tail-" + acemq.NewEnvelope().ID,
		Args: transport.Table{"x-stream-offset": pos.Arg()}})
	if err != nil {
		return fmt.Errorf("cannot read %q from %s (%s); check that it is a stream (acemq stream info %s)", name, pos, sentence(err), name)
	}
	rw := &rawWriter{w: out}
	for got := 0; n == 0 || got < n; got++ {
		var d transport.Delivery
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case d, ok = <-deliveries:
		}
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("the broker ended the subscription to %q (%v); check whether the stream was deleted and run tail again", name, ch.Err())
		}
		off, isStream := offsetOf(d.Headers)
		if !isStream {
			return fmt.Errorf("%q is not a stream: its messages carry no offset; use acemq tail for queues", name)
		}
		_ = ch.Ack(d.DeliveryTag)
		if raw {
			if err := rw.body(d.Body); err != nil {
				return err
			}
			continue
		}
		env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID, d.ReplyTo)
		line := streamLine{Offset: off, ID: env.ID, Type: env.Type, CorrelationID: env.CorrelationID,
			RoutingKey: d.RoutingKey, ContentType: d.ContentType, Body: string(d.Body)}
		if !env.FirstSeen.IsZero() {
			line.FirstSeen = env.FirstSeen.UTC().Format(time.RFC3339Nano)
		}
		if err := writeJSONLine(out, line); err != nil {
			return err
		}
	}
	return nil
}

func offsetOf(h map[string]any) (int64, bool) {
	switch v := h["x-stream-offset"].(type) {
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case int:
		return int64(v), true
	}
	return 0, false
}

// streamInfo is what stream info reports.
type streamInfo struct {
	Name string `json:"name"`
	// FirstOffset and LastOffset are -1 when the stream is empty.
	FirstOffset int64 `json:"firstOffset"`
	LastOffset  int64 `json:"lastOffset"`
	// Messages is LastOffset − FirstOffset + 1 (what the stream retains).
	Messages int64 `json:"messages"`
	// The retention arguments as declared ("" / 0 when not set).
	MaxAge          string `json:"maxAge,omitempty"`
	MaxLengthBytes  int64  `json:"maxLengthBytes,omitempty"`
	MaxSegmentBytes int64  `json:"maxSegmentSizeBytes,omitempty"`
	Consumers       *int   `json:"consumers,omitempty"`
	// Retention says where the retention came from, or why it is unknown.
	Retention string `json:"retention"`
}

func newStreamInfo() *cobra.Command {
	var u, mgmt string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info STREAM",
		Short: "Show a stream's retention, offsets and size",
		Long: "Show a stream's retention (x-max-age, x-max-length-bytes, segment size), its oldest and newest offsets and " +
			"how many messages it retains. Offsets are read over AMQP with two short-lived consumers; retention comes from " +
			"RabbitMQ's management HTTP API (AMQP cannot read a queue's arguments). A memory:// broker lives inside one " +
			"process, so a separate process sees none of its streams.",
		Example: `  acemq stream info orders.history
  acemq stream info orders.history --management-url http://guest:guest@localhost:15672/ --json`,
		Args: exactStreamArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			c, err := connect(ctx, u, "acemq-stream-info")
			if err != nil {
				return err
			}
			defer closeConn(c)
			if err := requireStream(ctx, c, name); err != nil {
				return err
			}
			b, err := stream.Probe(ctx, c, name)
			if err != nil {
				return fmt.Errorf("cannot read the offsets of %q (%s)", name, sentence(err))
			}
			info := streamInfo{Name: name, FirstOffset: b.First, LastOffset: b.Last, Messages: b.Messages()}
			// The consumer count over AMQP (a passive declaration): the
			// management API's count is one of its statistics, which a
			// RabbitMQ 4 that denies management_metrics_collection omits.
			if qi, err := c.QueueInfo(ctx, name); err == nil {
				n := qi.Consumers
				info.Consumers = &n
			}
			if isMemory(u) {
				info.Retention = "not readable on memory:// (the in-process broker has no management API)"
			} else if err := managementRetention(ctx, u, mgmt, &info); err != nil {
				if mgmt != "" {
					return err
				}
				info.Retention = "unknown: " + sentence(err)
			}
			return printStreamInfo(cmd.OutOrStdout(), info, asJSON)
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().StringVar(&mgmt, "management-url", os.Getenv("ACEMQ_MANAGEMENT_URL"), "RabbitMQ management API, to read the retention (default $ACEMQ_MANAGEMENT_URL, else --url's host and credentials on port 15672)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// managementRetention fills info's retention from the management API's
// record of the queue: its declared arguments, which the API lists on
// every version (the statistics beside them are missing on a RabbitMQ 4
// that denies management_metrics_collection).
func managementRetention(ctx context.Context, brokerURL, mgmtURL string, info *streamInfo) error {
	if mgmtURL == "" {
		var err error
		if mgmtURL, err = queuelist.ManagementURL(brokerURL); err != nil {
			return err
		}
	}
	base, err := url.Parse(mgmtURL)
	if err != nil {
		return fmt.Errorf("the management URL %q does not parse; pass --management-url http://user:pass@host:15672/", redact.URL(mgmtURL))
	}
	user := base.User
	base.User = nil
	endpoint := strings.TrimSuffix(base.String(), "/") + "/api/queues/" + url.PathEscape(queuelist.VhostOf(brokerURL)) + "/" + url.PathEscape(info.Name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return err
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the RabbitMQ management API at %s did not answer (%v); enable the rabbitmq_management plugin or pass --management-url", redact.URL(mgmtURL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the RabbitMQ management API at %s answered %s for %q; check --management-url and the user's permissions", redact.URL(mgmtURL), resp.Status, info.Name)
	}
	var q struct {
		Type      string         `json:"type"`
		Arguments map[string]any `json:"arguments"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&q); err != nil {
		return fmt.Errorf("the management API's answer did not parse (%v); check that --management-url points at RabbitMQ's management API", err)
	}
	if q.Type != "" && q.Type != "stream" {
		return fmt.Errorf("%q is a %s queue, not a stream", info.Name, q.Type)
	}
	info.MaxAge, _ = q.Arguments["x-max-age"].(string)
	if v, ok := q.Arguments["x-max-length-bytes"].(float64); ok {
		info.MaxLengthBytes = int64(v)
	}
	if v, ok := q.Arguments["x-stream-max-segment-size-bytes"].(float64); ok {
		info.MaxSegmentBytes = int64(v)
	}
	info.Retention = "declared arguments, from the management API"
	return nil
}

func printStreamInfo(w io.Writer, info streamInfo, asJSON bool) error {
	if asJSON {
		return writeJSONLine(w, info)
	}
	or := func(s, none string) string {
		if s == "" {
			return none
		}
		return s
	}
	num := func(v int64) string {
		if v == 0 {
			return "not set"
		}
		return fmt.Sprint(v)
	}
	fmt.Fprintf(w, "stream     %s\n", safetext.Line(info.Name))
	if info.LastOffset < 0 {
		fmt.Fprintf(w, "offsets    none (empty)\n")
	} else {
		fmt.Fprintf(w, "offsets    %d … %d\n", info.FirstOffset, info.LastOffset)
	}
	fmt.Fprintf(w, "messages   %d\n", info.Messages)
	if info.Consumers != nil {
		fmt.Fprintf(w, "consumers  %d\n", *info.Consumers)
	}
	if strings.HasPrefix(info.Retention, "declared") {
		fmt.Fprintf(w, "max age    %s\n", safetext.Line(or(info.MaxAge, "not set")))
		fmt.Fprintf(w, "max bytes  %s\n", num(info.MaxLengthBytes))
		fmt.Fprintf(w, "segment    %s\n", num(info.MaxSegmentBytes))
	} else {
		fmt.Fprintf(w, "retention  %s\n", safetext.Line(info.Retention))
	}
	return nil
}

func exactStreamArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
		return fmt.Errorf("%s needs exactly one stream name; run it as `%s orders.history`", cmd.CommandPath(), cmd.CommandPath())
	}
	return nil
}

// requireStream fails with a sentence when name does not exist.
func requireStream(ctx context.Context, c *acemq.Conn, name string) error {
	if _, err := c.QueueInfo(ctx, name); err != nil {
		if transport.Code(err) == transport.CodeNotFound {
			return fmt.Errorf("stream %q does not exist on the broker; check the name (a topology declares it with acemq.QueueOptions{Type: acemq.Stream})", name)
		}
		return fmt.Errorf("cannot inspect stream %q (%s); check the connection and retry", name, strings.TrimSuffix(sentence(err), "."))
	}
	return nil
}
