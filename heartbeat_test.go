package acemq_test

import (
	"context"
	"log/slog"
	"net/http"
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
				type connection struct {
					Timeout int `json:"timeout"`
					Client  struct {
						Name string `json:"connection_name"`
					} `json:"client_properties"`
				}
				seen := map[string]int{}
				for deadline := time.Now().Add(30 * time.Second); len(seen) < 2; {
					if time.Now().After(deadline) {
						t.Fatalf("the broker lists %d of the Conn's 2 connections after 30s", len(seen))
					}
					var list []connection
					testenv.Management(t, http.MethodGet, "/api/connections?columns=timeout,client_properties.connection_name", nil, &list)
					for _, l := range list {
						if l.Client.Name == name+" (publishing)" || l.Client.Name == name+" (consuming)" {
							seen[l.Client.Name] = l.Timeout
						}
					}
					if len(seen) < 2 {
						time.Sleep(200 * time.Millisecond) // the management database catches up
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
