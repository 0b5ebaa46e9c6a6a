package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/replay"
	"github.com/acemq-go/acemq/transport"
)

// quorumDLQ declares a quorum queue named like a dead-letter queue with
// args and fills it with n messages.
func quorumDLQ(t *testing.T, c *acemq.Conn, prefix string, limit int, n int) (string, []string) {
	t.Helper()
	q := testenv.Unique(prefix) + ".dlq"
	if err := c.Apply(context.Background(), acemq.NewTopology().Queue(q, acemq.QueueOptions{Type: acemq.Quorum, DeliveryLimit: limit})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), q) })
	return q, fill(t, c, q, "m", n)
}

// Fifty reads of a quorum dead-letter queue, as a console left open or a
// script would make, leave every message in it, in its place, whatever
// the broker version and whatever delivery limit the queue has: where a
// read would count toward a limit, Browse refuses and takes nothing.
// (Before: on RabbitMQ 4 the default limit of 20 dead-lettered or dropped
// every message by the 21st read.)
func TestFiftyReadsOfAQuorumDeadLetterQueueLoseNothing(t *testing.T) {
	url := testenv.AMQPURL(t)
	c := connect(t, url)
	major := testenv.RabbitMajor(t)
	cases := []struct {
		name  string
		limit int // QueueOptions.DeliveryLimit: 0 = none declared
	}{{"no limit declared", 0}, {"limit 5", 5}}
	if major >= 4 {
		cases = append(cases, struct {
			name  string
			limit int
		}{"limit -1 (none, on RabbitMQ 4)", -1})
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			ctx := context.Background()
			q, ids := quorumDLQ(t, c, "replay.fifty", k.limit, 3)
			refused := 0
			for i := range 50 {
				var seen []string
				_, err := replay.Browse(ctx, c, q, 100, func(m *acemq.Pulled) bool {
					seen = append(seen, m.Envelope.ID)
					return true
				}, manage(c))
				var unsafe *replay.UnsafeReadError
				switch {
				case errors.As(err, &unsafe):
					refused++
				case err != nil:
					t.Fatalf("read %d: %v", i+1, err)
				case !slices.Equal(seen, ids):
					t.Fatalf("read %d saw %v, want %v", i+1, seen, ids)
				}
			}
			// The end of the test takes them for good, to see each one.
			var got []string
			byNack := transportSaysNackUncounted(t, c) && (k.limit > 0 || k.limit == 0 && major >= 4)
			for _, m := range drain(t, c, q) {
				got = append(got, m.Envelope.ID)
				// RabbitMQ 4.3 hands the reads' nacks back uncounted: the
				// delivery count is still that of a message never returned.
				if n := m.Headers["x-delivery-count"]; byNack && n != nil && fmt.Sprint(n) != "0" {
					t.Fatalf("after 50 reads on %s message %s has x-delivery-count %v, want none", q, m.Envelope.ID, n)
				}
			}
			if !slices.Equal(got, ids) {
				t.Fatalf("after 50 reads %s holds %v, want %v", q, got, ids)
			}
			// Which reads were refused is per version: a limit the reads
			// would move toward (RabbitMQ 4's default of 20; any declared
			// one before 4.3).
			wantRefused := k.limit > 0 || k.limit == 0 && major >= 4
			if transportSaysNackUncounted(t, c) {
				wantRefused = false
			}
			if wantRefused != (refused == 50) || !wantRefused && refused != 0 {
				t.Fatalf("%d of 50 reads refused on RabbitMQ %d, want all refused %v", refused, major, wantRefused)
			}
		})
	}
}

// transportSaysNackUncounted reports whether c's broker is RabbitMQ 4.3
// or later, where a read hands a limited quorum queue's messages back
// with a nack that counts nothing.
func transportSaysNackUncounted(t *testing.T, c *acemq.Conn) bool {
	t.Helper()
	ch, err := c.Channel(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	s := ch.(transport.ServerReporter).Server()
	var major, minor int
	_, _ = fmt.Sscanf(s.Version, "%d.%d", &major, &minor)
	return major > 4 || major == 4 && minor >= 3
}

// Without the management API, RabbitMQ cannot say what a read does to a
// queue, so Browse reads nothing and says why; AllowUnsafeRead reads.
func TestBrowseWithoutTheManagementAPIRefusesOnRabbitMQ(t *testing.T) {
	c := connect(t, testenv.AMQPURL(t))
	q, ids := setup(t, c, 2)
	dlq := acemq.DeadLetterQueue(q)
	_, err := replay.Browse(context.Background(), c, dlq, 10, nil)
	var unsafe *replay.UnsafeReadError
	if !errors.As(err, &unsafe) || !strings.Contains(err.Error(), "management API") || !strings.HasPrefix(err.Error(), "acemq: ") {
		t.Fatalf("Browse without a management API: %v", err)
	}
	n, err := replay.Browse(context.Background(), c, dlq, 10, nil, replay.AllowUnsafeRead())
	if err != nil || n != 2 {
		t.Fatalf("with AllowUnsafeRead: %d %v", n, err)
	}
	if got, _ := browseIDs(t, c, dlq); !slices.Equal(got, ids) {
		t.Fatalf("%s holds %v, want %v", dlq, got, ids)
	}
}

// A policy the operator sets is what decides: "delivery-limit": 3 on a
// quorum .dlq makes a read unsafe on RabbitMQ before 4.3; on 4.x a policy
// of -1 outranks the default of 20 and makes it safe.
func TestInspectReadsThePoliciesInForce(t *testing.T) {
	c := connect(t, testenv.AMQPURL(t))
	mgmt := os.Getenv("ACEMQ_TEST_MANAGEMENT_URL")
	if mgmt == "" {
		t.Fatal("ACEMQ_TEST_MANAGEMENT_URL is not set; `make services-up` sets it")
	}
	ctx := context.Background()
	q, _ := quorumDLQ(t, c, "replay.policy", 0, 1)
	setPolicy := func(limit int) {
		body := fmt.Sprintf(`{"pattern":"^%s$","definition":{"delivery-limit":%d},"apply-to":"queues","priority":9}`, strings.ReplaceAll(q, ".", `\\.`), limit)
		name := "acemq-test-" + q
		managementDo(t, mgmt, http.MethodPut, "api/policies/%2F/"+url.PathEscape(name), body)
		t.Cleanup(func() { managementDo(t, mgmt, http.MethodDelete, "api/policies/%2F/"+url.PathEscape(name), "") })
	}
	nackUncounted := transportSaysNackUncounted(t, c)
	if testenv.RabbitMajor(t) >= 4 {
		setPolicy(-1)
		a, err := replay.Inspect(ctx, c, q, manage(c))
		if err != nil || !a.Safe || a.Type != "quorum" {
			t.Fatalf("with a policy of -1 on RabbitMQ 4: %+v %v", a, err)
		}
		return
	}
	setPolicy(3)
	a, err := replay.Inspect(ctx, c, q, manage(c))
	if err != nil || a.Safe != nackUncounted || a.DeliveryLimit != 3 || !strings.Contains(a.LimitFrom, "policy") {
		t.Fatalf("with a policy of 3: %+v %v", a, err)
	}
}

func managementDo(t *testing.T, base, method, path, body string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	user := u.User
	u.User = nil
	req, err := http.NewRequest(method, strings.TrimSuffix(u.String(), "/")+"/"+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := user.Password()
	req.SetBasicAuth(user.Username(), pw)
	req.Header.Set("Content-Type", "application/json")
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %s", method, path, resp.Status)
	}
}
