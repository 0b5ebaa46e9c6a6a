package acemq_test

import (
	"context"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
)

func TestPlanWarnsOfAQuorumQueueWithNoBrokerSideDefence(t *testing.T) {
	r := newRig(t)
	tp := acemq.NewTopology().
		Queue("bare", acemq.QueueOptions{Type: acemq.Quorum}).
		Queue("limited", acemq.QueueOptions{Type: acemq.Quorum, DeliveryLimit: 5}).
		Queue("wired", acemq.QueueOptions{Type: acemq.Quorum}).DeadLetters("wired").
		Queue("classic", acemq.QueueOptions{Type: acemq.Classic})
	plan, err := r.c.Plan(context.Background(), tp)
	if err != nil {
		t.Fatal(err)
	}
	warned := map[string]string{}
	for _, it := range plan.Items {
		if it.Warning != "" {
			warned[it.Declaration.Queue.Name] = it.Warning
		}
	}
	if len(warned) != 1 || !strings.Contains(warned["bare"], `quorum queue "bare" has neither a delivery limit nor dead-letter wiring`) {
		t.Fatalf("warnings %v, want exactly one, for bare", warned)
	}
	if !strings.Contains(plan.String(), "  warning: quorum queue \"bare\"") {
		t.Fatalf("plan text lacks the warning:\n%s", plan)
	}
}
