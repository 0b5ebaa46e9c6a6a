package acemq_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
)

// Config.Heartbeat < 0 turns heartbeats off on both of a Conn's
// connections, as the broker sees them (its management API says timeout
// 0), on both frame writers; Config() reports -1. A sub-second value is
// rounded up to a whole second (AMQP carries seconds), never to 0 (which
// would take the broker's 60 s).
func TestHeartbeatsOffAreOffAtTheBrokerAndSubSecondRoundsUp(t *testing.T) {
	for _, c := range []struct {
		name      string
		heartbeat time.Duration
		want      int // the broker's timeout, seconds
		reported  time.Duration
	}{
		{"off", -1, 0, -1},
		{"500ms", 500 * time.Millisecond, 1, time.Second},
	} {
		for _, frames := range []string{"native", "amqp091"} {
			t.Run(c.name+"/"+frames, func(t *testing.T) {
				name := testenv.Unique("heartbeat")
				conn, err := acemq.Connect(context.Background(), testenv.AMQPURL(t)+"?frames="+frames, acemq.Config{
					Logger: slog.New(slog.DiscardHandler), ClientName: name, Heartbeat: c.heartbeat,
				})
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(context.Background())
				if got := conn.Config().Heartbeat; got != c.reported {
					t.Errorf("Config().Heartbeat = %s, want %s", got, c.reported)
				}
				// rabbitmqctl reads the connections on every version; the
				// management API lists none on a RabbitMQ 4.3 that denies
				// management_metrics_collection.
				testenv.RequireRabbitCtl(t)
				seen := map[string]int{}
				for deadline := time.Now().Add(30 * time.Second); len(seen) < 2; {
					if time.Now().After(deadline) {
						t.Fatalf("rabbitmqctl lists %d of the Conn's 2 connections after 30s", len(seen))
					}
					out := testenv.RabbitCtl(t, "list_connections", "timeout", "client_properties", "--formatter", "json", "--quiet")
					var list []struct {
						Timeout    int     `json:"timeout"`
						Properties [][]any `json:"client_properties"`
					}
					if err := json.Unmarshal([]byte(out), &list); err != nil {
						t.Fatalf("rabbitmqctl list_connections: %v\n%s", err, out)
					}
					for _, l := range list {
						for _, p := range l.Properties {
							if len(p) == 3 && p[0] == "connection_name" && (p[2] == name+" (publishing)" || p[2] == name+" (consuming)") {
								seen[p[2].(string)] = l.Timeout
							}
						}
					}
					if len(seen) < 2 {
						time.Sleep(200 * time.Millisecond) // the connections finish opening
					}
				}
				for n, got := range seen {
					if got != c.want {
						t.Errorf("%s: the broker's heartbeat timeout is %ds, want %d", n, got, c.want)
					}
				}
			})
		}
	}
}
