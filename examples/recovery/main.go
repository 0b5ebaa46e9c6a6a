// Command recovery is the third journey: the broker drops the connection
// while a service publishes and consumes, and the library recovers on its
// own. The connection events are printed as they happen (lost, retrying,
// recovered with the publishing gap); publishes made during the recovery
// wait for it (acemq.Config.WaitForRecovery) instead of failing; the consumer
// is re-attached with the same tag. Every publish that returned nil is
// consumed. On memory:// the example drops the connections itself; on
// RabbitMQ it connects as a user of its own (made through the management API,
// deleted at the end) and closes that user's connections through the API,
// which works with or without the API's statistics (RabbitMQ 4 can run
// without them, and then cannot name a connection by its client name):
//
//	go run ./examples/recovery
//	go run ./examples/recovery -url amqp://guest:guest@127.0.0.1:5672/ -management http://guest:guest@127.0.0.1:15672/
//
// (or set ACEMQ_URL / ACEMQ_MANAGEMENT_URL). It exits 0 only if it saw the
// recovered event and every confirmed message arrived.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/transport/memory"
)

func main() {
	brokerURL := flag.String("url", env("ACEMQ_URL", "memory://recovery"), "broker URL (memory://name or amqp://…)")
	mgmt := flag.String("management", env("ACEMQ_MANAGEMENT_URL", ""), "RabbitMQ management URL (http://user:pass@host:15672/), needed to force a close on RabbitMQ")
	flag.Parse()
	if err := run(*brokerURL, *mgmt); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(brokerURL, mgmt string) error {
	if !strings.HasPrefix(brokerURL, "memory://") && mgmt == "" {
		return errors.New("on RabbitMQ the example closes its connection through the management API: pass -management http://user:pass@host:15672/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := fmt.Sprintf("example-recovery-%d", time.Now().UnixNano())
	var api *mgmtAPI
	if !strings.HasPrefix(brokerURL, "memory://") {
		var err error
		if api, err = newMgmtAPI(mgmt); err != nil {
			return err
		}
		if brokerURL, err = api.userOfOwn(ctx, brokerURL, name); err != nil {
			return err
		}
		defer api.call(context.Background(), http.MethodDelete, "/api/users/"+url.PathEscape(name), nil)
	}
	recovered := make(chan struct{}, 4)
	c, err := acemq.Connect(ctx, brokerURL, acemq.Config{Logger: slog.New(slog.DiscardHandler), ClientName: name, WaitForRecovery: true, OnEvent: func(e acemq.Event) {
		switch e.Kind {
		case acemq.EventLost:
			fmt.Printf("event: lost (%v)\n", e.Err)
		case acemq.EventRetrying:
			fmt.Printf("event: retrying, attempt %d\n", e.Attempt)
		case acemq.EventRecovered:
			fmt.Printf("event: recovered after %d attempt(s); publishing was unavailable for %v\n", e.Attempt, e.Gap.Round(time.Millisecond))
			recovered <- struct{}{}
		default:
			fmt.Printf("event: %s\n", e.Kind)
		}
	}})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())

	queue := "example.recovery." + time.Now().Format("150405.000000")
	if err := c.Apply(ctx, acemq.NewTopology().Queue(queue, acemq.QueueOptions{}).DeadLetters(queue)); err != nil {
		return err
	}
	defer func() {
		for _, q := range []string{queue, acemq.DeadLetterQueue(queue), acemq.ParkedQueue(queue)} {
			_, _ = c.DeleteQueue(context.Background(), q)
		}
	}()

	var mu sync.Mutex
	received := map[int]int{}
	cons, err := acemq.Consume(ctx, c, queue, func(_ context.Context, m *acemq.Message[int]) acemq.Decision {
		mu.Lock()
		received[m.Payload]++
		mu.Unlock()
		return acemq.Accept()
	}, acemq.ConsumerConfig{})
	if err != nil {
		return err
	}

	// Publish steadily; halfway through, the broker drops the connection.
	pub := acemq.NewPublisher[int](c, "", queue, acemq.PublisherConfig{})
	var confirmed []int
	lost := 0
	for i := range 200 {
		if i == 100 {
			if err := drop(ctx, brokerURL, api, name); err != nil {
				return err
			}
		}
		_, err := pub.Send(ctx, i) // waits out the recovery (Config.WaitForRecovery)
		var perr *acemq.PublishError
		switch {
		case err == nil:
			confirmed = append(confirmed, i)
		case errors.As(err, &perr) && perr.Sent:
			// The connection died with this publish in flight: it may or
			// may not have arrived. A real service retries it (the id makes
			// the copy detectable); the example counts it.
			lost++
		default:
			return err
		}
	}
	select {
	case <-recovered:
	case <-ctx.Done():
		return errors.New("no recovered event")
	}
	fmt.Printf("%d publishes confirmed, %d may have been lost when the connection dropped\n", len(confirmed), lost)

	// Every confirmed message arrives (possibly twice: at least once).
	for {
		mu.Lock()
		missing := 0
		for _, i := range confirmed {
			if received[i] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d confirmed messages never arrived", missing)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cons.Close(ctx); err != nil {
		return err
	}
	fmt.Println("every confirmed message was consumed; the consumer was re-attached")
	fmt.Println("OK")
	return nil
}

// drop closes the example's connections as a broker would on a restart.
func drop(ctx context.Context, brokerURL string, api *mgmtAPI, user string) error {
	if name, ok := strings.CutPrefix(brokerURL, "memory://"); ok {
		name, _, _ = strings.Cut(name, "?")
		memory.Lookup(name).DropConnections()
		return nil
	}
	_, err := api.call(ctx, http.MethodDelete, "/api/connections/username/"+url.PathEscape(user), nil)
	return err
}

// mgmtAPI calls RabbitMQ's management HTTP API.
type mgmtAPI struct {
	base *url.URL
}

func newMgmtAPI(mgmt string) (*mgmtAPI, error) {
	base, err := url.Parse(strings.TrimSuffix(mgmt, "/"))
	if err != nil {
		return nil, err
	}
	return &mgmtAPI{base: base}, nil
}

func (a *mgmtAPI) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	u := *a.base
	u.User = nil
	var in io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		in = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String()+path, in)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.base.User != nil {
		pw, _ := a.base.User.Password()
		req.SetBasicAuth(a.base.User.Username(), pw)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("the management API answered %s %s with %s", method, path, resp.Status)
	}
	return b, nil
}

// userOfOwn makes user (random password, every permission on brokerURL's
// vhost) and returns brokerURL with that user's credentials.
func (a *mgmtAPI) userOfOwn(ctx context.Context, brokerURL, user string) (string, error) {
	u, err := url.Parse(brokerURL)
	if err != nil {
		return "", err
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	password := hex.EncodeToString(secret)
	if _, err := a.call(ctx, http.MethodPut, "/api/users/"+url.PathEscape(user), map[string]string{"password": password, "tags": ""}); err != nil {
		return "", err
	}
	vhost := strings.TrimPrefix(u.Path, "/")
	if vhost == "" {
		vhost = "/"
	} else if v, err := url.PathUnescape(vhost); err == nil {
		vhost = v
	}
	perms := map[string]string{"configure": ".*", "write": ".*", "read": ".*"}
	if _, err := a.call(ctx, http.MethodPut, "/api/permissions/"+url.PathEscape(vhost)+"/"+url.PathEscape(user), perms); err != nil {
		return "", err
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}
