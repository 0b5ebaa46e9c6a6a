package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq"
)

func newPublish() *cobra.Command {
	var u, exchange, key, queue, body, typ, corr, codecName string
	var headers []string
	cmd := &cobra.Command{
		Use:   "publish",
		Short: "Publish messages from --body or stdin lines, confirmed and mandatory; prints each envelope id",
		Long: "Publish one message (--body) or one per non-empty stdin line, each mandatory (an unroutable message is an error) " +
			"and confirmed by the broker. Prints `confirmed ID` per message. Stops at the first failure and says how many were confirmed before it.",
		Example: `  acemq publish --exchange orders --key order.created --body '{"id":"o-1"}'
  acemq publish --queue orders.new --type OrderPlaced < orders.jsonl
  printf 'a\nb\n' | acemq publish --queue notes --codec text`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if queue != "" {
				if exchange != "" || key != "" {
					return fmt.Errorf("--queue publishes through the default exchange; give either --queue or --exchange/--key, not both")
				}
				key = queue
			}
			if key == "" && exchange == "" {
				return fmt.Errorf("nowhere to publish; pass --queue NAME, or --exchange NAME --key ROUTING.KEY")
			}
			opts := acemq.SendOptions{Mandatory: true}
			if typ != "" {
				opts.Type = typ
			}
			if corr != "" {
				opts.CorrelationID = corr
			}
			for _, h := range headers {
				k, v, ok := strings.Cut(h, "=")
				if !ok || k == "" {
					return fmt.Errorf("--header %q is not NAME=VALUE; write it like --header tenant=acme", h)
				}
				if opts.Headers == nil {
					opts.Headers = map[string]any{}
				}
				opts.Headers[k] = v
			}
			var lines []string
			if cmd.Flags().Changed("body") {
				lines = []string{body}
			} else {
				sc := bufio.NewScanner(cmd.InOrStdin())
				sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
				for sc.Scan() {
					if l := sc.Text(); strings.TrimSpace(l) != "" {
						lines = append(lines, l)
					}
				}
				if err := sc.Err(); err != nil {
					return fmt.Errorf("cannot read messages from stdin (%v); pass --body or pipe one message per line", err)
				}
				if len(lines) == 0 {
					return fmt.Errorf("no message to publish; pass --body TEXT or pipe one message per line on stdin")
				}
			}
			payloads := make([]any, len(lines))
			codecs := make([]acemq.Codec, len(lines))
			for i, l := range lines {
				p, c, err := encodeLine(l, codecName)
				if err != nil {
					return fmt.Errorf("message %d: %w", i+1, err)
				}
				payloads[i], codecs[i] = p, c
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
			defer cancel()
			c, err := connect(ctx, u, "acemq-publish")
			if err != nil {
				return err
			}
			defer closeConn(c)
			out := cmd.OutOrStdout()
			var bar *progress
			if !cmd.Flags().Changed("body") {
				bar = newProgress(cmd.ErrOrStderr(), "publishing", int64(len(payloads)))
			}
			for i, p := range payloads {
				o := opts
				o.Codec = codecs[i]
				sent, err := c.Publish(ctx, exchange, key, p, o)
				if err != nil {
					if bar != nil {
						bar.Done()
					}
					what := "it may not have arrived; check the broker and publish it again"
					if acemq.IsUnroutable(err) {
						what = "no queue is bound for that exchange and key; declare and bind one (acemq topology apply) and publish again"
					}
					return fmt.Errorf("message %d of %d was not confirmed (%s): %s; %d before it were confirmed", i+1, len(payloads), strings.TrimSuffix(sentence(err), "."), what, i)
				}
				fmt.Fprintf(out, "confirmed %s\n", sent.Envelope.ID)
				if bar != nil {
					bar.Add(1)
				}
			}
			if bar != nil {
				bar.Done()
			}
			return nil
		},
	}
	urlFlag(cmd, &u)
	f := cmd.Flags()
	f.StringVar(&exchange, "exchange", "", "exchange to publish to (\"\" = the default exchange)")
	f.StringVar(&key, "key", "", "routing key")
	f.StringVar(&queue, "queue", "", "publish straight to this queue (default exchange, key = queue)")
	f.StringVar(&body, "body", "", "the message body (otherwise one message per stdin line)")
	f.StringVar(&typ, "type", "", "envelope type (default: the routing key)")
	f.StringVar(&corr, "correlation", "", "correlation id (default: the message's own id)")
	f.StringVar(&codecName, "codec", "auto", "auto (json when the body is JSON, else text), json or text")
	f.StringArrayVar(&headers, "header", nil, "application header NAME=VALUE (repeatable)")
	return cmd
}

// encodeLine turns one body into a payload and the codec that sends it
// unchanged.
func encodeLine(l, codec string) (any, acemq.Codec, error) {
	switch codec {
	case "json":
		if !json.Valid([]byte(l)) {
			return nil, nil, fmt.Errorf("the body is not valid JSON; fix it or pass --codec text")
		}
		return json.RawMessage(l), acemq.JSON(), nil
	case "text":
		return l, acemq.Text(), nil
	case "auto":
		if json.Valid([]byte(l)) {
			return json.RawMessage(l), acemq.JSON(), nil
		}
		return l, acemq.Text(), nil
	}
	return nil, nil, fmt.Errorf("--codec %q is not known; use auto, json or text", codec)
}
