package acemq_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Queue arguments a RabbitMQ version refuses are refused by Validate first
// (the broker's 406 closes the channel in the middle of an Apply), saying
// which versions refuse them. TestRabbitRefusesWhatValidateSaysItRefuses
// checks each sentence on the node of each `make test` pass.

func TestValidateRefusesQueueArgumentsAVersionRefuses(t *testing.T) {
	cases := []struct {
		name string
		o    acemq.QueueOptions
		want string // "" when Validate accepts it
	}{
		{"x-queue-version 1 on a classic queue", acemq.QueueOptions{Type: acemq.Classic, Args: transport.Table{"x-queue-version": int32(1)}},
			`queue "q" sets x-queue-version 1, which RabbitMQ 4.3 refuses (406 unsupported queue version '1'); 3.10 and 4.0 still accept it`},
		{"x-queue-version 1 as an int", acemq.QueueOptions{Type: acemq.Classic, Args: transport.Table{"x-queue-version": 1}}, "which RabbitMQ 4.3 refuses"},
		{"x-queue-version 2 on a classic queue", acemq.QueueOptions{Type: acemq.Classic, Args: transport.Table{"x-queue-version": int64(2)}}, ""},
		{"x-queue-mode on a quorum queue", acemq.QueueOptions{Args: transport.Table{"x-queue-mode": "lazy"}},
			`queue "q" sets x-queue-mode, which a quorum queue does not take: RabbitMQ refuses it (406) on every version (3.10, 4.0 and 4.3 alike)`},
		{"x-queue-version on a stream", acemq.QueueOptions{Type: acemq.Stream, Args: transport.Table{"x-queue-version": int32(2)}},
			`sets x-queue-version, which a stream queue does not take`},
		// Accepted and kept by 3.10.8, 4.0.5 and 4.3.6 alike (measured): a
		// plan warning (TestPlanWarnsOfQueueModeOnAClassicQueue), not a refusal.
		{"x-queue-mode on a classic queue", acemq.QueueOptions{Type: acemq.Classic, Args: transport.Table{"x-queue-mode": "lazy"}}, ""},
	}
	for _, tc := range cases {
		err := acemq.NewTopology().Queue("q", tc.o).Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Validate() = %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}

func TestPlanWarnsOfQueueModeOnAClassicQueue(t *testing.T) {
	r := newRig(t)
	tp := acemq.NewTopology().Queue("lazy", acemq.QueueOptions{Type: acemq.Classic, Args: transport.Table{"x-queue-mode": "lazy"}})
	plan, err := r.c.Plan(context.Background(), tp)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Items) != 1 || !strings.Contains(plan.Items[0].Warning, `classic queue "lazy" sets x-queue-mode=lazy, which RabbitMQ 3.12 and later ignore`) {
		t.Fatalf("plan %+v, want a warning about x-queue-mode", plan.Items)
	}
}

// TestRabbitRefusesWhatValidateSaysItRefuses declares, with a plain AMQP
// client, each argument Validate refuses or warns about, and checks the
// node answers as Validate's sentence says for its version: x-queue-mode
// and x-queue-version are refused on a quorum queue everywhere,
// x-queue-version 1 on a classic queue from 4.3 on, and x-queue-mode on a
// classic queue is accepted by every version tested.
func TestRabbitRefusesWhatValidateSaysItRefuses(t *testing.T) {
	c, _ := rabbit(t)
	_, version := c.Broker()
	refusesV1 := versionAtLeast(t, version, 4, 3)
	cases := []struct {
		name    string
		args    amqp.Table
		refused bool
	}{
		{"x-queue-mode on a quorum queue", amqp.Table{"x-queue-type": "quorum", "x-queue-mode": "lazy"}, true},
		{"x-queue-version on a quorum queue", amqp.Table{"x-queue-type": "quorum", "x-queue-version": int32(2)}, true},
		{"x-queue-version 1 on a classic queue", amqp.Table{"x-queue-version": int32(1)}, refusesV1},
		{"x-queue-version 2 on a classic queue", amqp.Table{"x-queue-version": int32(2)}, false},
		{"x-queue-mode on a classic queue", amqp.Table{"x-queue-mode": "lazy"}, false},
	}
	url := testenv.AMQPURL(t)
	for _, tc := range cases {
		q := testenv.Unique("version-args")
		ch := testenv.RawChannel(t, url)
		_, err := ch.QueueDeclare(q, true, false, false, false, tc.args)
		if err == nil {
			deleteQueues(t, q)
		}
		if refused := err != nil; refused != tc.refused {
			t.Errorf("RabbitMQ %s, %s: declare error %v, want refused=%v (what Validate and docs/support.md say)", version, tc.name, err, tc.refused)
		}
		if tc.refused && !strings.Contains(err.Error(), "406") {
			t.Errorf("RabbitMQ %s, %s: refused with %v, want 406 PRECONDITION_FAILED", version, tc.name, err)
		}
	}
}

// versionAtLeast reports whether a RabbitMQ version ("4.3.6") is at least
// major.minor, failing the test when it does not read as one.
func versionAtLeast(t *testing.T, version string, major, minor int) bool {
	t.Helper()
	var ma, mi int
	if _, err := fmt.Sscanf(version, "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("the broker names its version %q; want major.minor.patch", version)
	}
	return ma > major || ma == major && mi >= minor
}
