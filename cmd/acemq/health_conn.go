package main

import (
	"context"
	"encoding/json"

	"github.com/acemq-go/acemq"
)

// connHealth connects to the broker and reports that connection's health
// in the actuator's shape. A broker that cannot be reached is an error.
func connHealth(ctx context.Context, u string) (healthBody, error) {
	c, err := connect(ctx, u, "acemq-health")
	if err != nil {
		return healthBody{}, err
	}
	defer closeConn(c)
	return reportOf(c), nil
}

// reportOf builds the contract §6 health report from local state only.
func reportOf(c *acemq.Conn) healthBody {
	details := map[string]any{"transport": c.Transport(), "open": c.State() == acemq.StateOpen, "blocked": c.Blocked(), "inFlight": 0}
	status := "UP"
	switch {
	case c.State() != acemq.StateOpen:
		status = "DOWN"
		details["detail"] = "the connection is " + c.State().String()
	case c.Blocked():
		details["blockedReason"] = c.BlockedReason()
		details["detail"] = "the broker has blocked this connection; publishing is paused: " + c.BlockedReason()
	}
	raw, _ := json.Marshal(map[string]any{"status": status, "components": map[string]any{"acemq": map[string]any{"status": status, "details": details}}})
	var h healthBody
	_ = json.Unmarshal(raw, &h)
	return h
}
