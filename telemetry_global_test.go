package acemq_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"testing"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/acemq-go/acemq"
)

// A Conn on the global meter provider skips its measurements while no SDK
// is set (the global instruments would drop them), and records once the
// application sets one after Connect. Setting the global is one-way for a
// process, so the test runs itself in a child process.
func TestMetricsFlowOnceTheGlobalMeterProviderIsSetAfterConnect(t *testing.T) {
	if os.Getenv("ACEMQ_TEST_GLOBAL_METER_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMetricsFlowOnceTheGlobalMeterProviderIsSetAfterConnect$", "-test.count", "1")
		cmd.Env = append(os.Environ(), "ACEMQ_TEST_GLOBAL_METER_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the child failed: %v\n%s", err, out)
		}
		return
	}
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://tel-global-meter", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := c.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{Type: acemq.Classic})); err != nil {
		t.Fatal(err)
	}
	pub := acemq.NewPublisher[order2](c, "", "orders", acemq.PublisherConfig{})
	if _, err := pub.Send(ctx, order2{ID: "before"}); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if _, err := pub.Send(ctx, order2{ID: "after"}); err != nil {
		t.Fatal(err)
	}
	o := &observed{reader: reader}
	if n := count(t, o.collect(t), "acemq.publish.total", map[string]string{"outcome": "confirmed"}); n != 1 {
		t.Fatalf("acemq.publish.total = %d after the global provider was set, want 1 (the publish before it is not recorded anywhere)", n)
	}
}
