package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/header"
)

// demoShipment is what the demo's shipping service handles.
type demoShipment struct {
	Order   string `json:"order"`
	Carrier string `json:"carrier"`
	Address string `json:"address"`
}

// demoConsole leaves dead letters behind for the console to show: a
// shipping consumer refuses 12 shipments for three reasons (and accepts
// them once replayed, as after a fix), then the console serves until ctx
// ends. The broker stays up in this process the whole time, so it works
// on memory:// too.
func demoConsole(ctx context.Context, out, errOut io.Writer, c *acemq.Conn, brokerURL string, f consoleFlags) error {
	const q = "demo.shipping"
	if err := c.Apply(ctx, acemq.NewTopology().Queue(q, acemq.QueueOptions{}).DeadLetters(q)); err != nil {
		return fmt.Errorf("cannot declare %s for the console demo (%s); check the broker", q, sentence(err))
	}
	reasons := []error{
		errors.New("carrier API answered 503: service unavailable"),
		errors.New("address rejected by the carrier: no postcode"),
		acemq.Fatal(errors.New("unknown carrier \"<script>alert(1)</script>\"")),
	}
	k, err := acemq.Consume(ctx, c, q, func(_ context.Context, m *acemq.Message[demoShipment]) acemq.Decision {
		if _, replayed := m.Envelope.Header(header.ReplayedFrom); replayed {
			return acemq.Accept() // "fixed": a replayed shipment goes through
		}
		switch {
		case m.Payload.Carrier == "":
			return acemq.Reject(reasons[2])
		case m.Payload.Address == "":
			return acemq.Reject(reasons[1])
		}
		return acemq.Reject(reasons[0])
	}, acemq.ConsumerConfig{})
	if err != nil {
		return fmt.Errorf("cannot start the shipping consumer (%s)", sentence(err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = k.Close(cctx)
	}()
	pub := acemq.NewPublisher[demoShipment](c, "", q, acemq.PublisherConfig{})
	for i := range 12 {
		s := demoShipment{Order: fmt.Sprintf("o-%d", 100+i), Carrier: "parcelco", Address: "1 Main St, 10115 Berlin"}
		switch i % 3 {
		case 1:
			s.Address = ""
		case 2:
			s.Carrier = ""
		}
		if _, err := pub.SendWith(ctx, s, acemq.SendOptions{Type: "ShipmentRequested"}); err != nil {
			return fmt.Errorf("cannot publish the console demo's shipments (%s)", sentence(err))
		}
	}
	if err := waitDepth(ctx, c, acemq.DeadLetterQueue(q), 12); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n— the dead-letter console: %s holds 12 shipments refused for three reasons\n", acemq.DeadLetterQueue(q))
	return serveConsole(ctx, out, errOut, c, brokerURL, f)
}
