package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq/cmd/acemq/internal/safetext"
)

// healthBody is the part of the actuator's health JSON (contract §6) the
// command reads.
type healthBody struct {
	Status     string `json:"status"`
	Components map[string]struct {
		Status  string         `json:"status"`
		Details map[string]any `json:"details"`
	} `json:"components"`
}

// healthExit maps a status to the exit code: UP 0, DEGRADED 2, anything
// else (DOWN, UNKNOWN) 1.
func healthExit(status string) int {
	switch status {
	case "UP":
		return 0
	case "DEGRADED":
		return 2
	}
	return 1
}

func healthLine(h healthBody) string {
	line := h.Status
	if a, ok := h.Components["acemq"]; ok {
		d := a.Details
		line += fmt.Sprintf(" transport=%v open=%v blocked=%v inFlight=%v", d["transport"], d["open"], d["blocked"], d["inFlight"])
		if r, ok := d["blockedReason"]; ok {
			line += fmt.Sprintf(" blockedReason=%q", r)
		}
		if r, ok := d["detail"]; ok {
			line += fmt.Sprintf(" detail=%q", r)
		}
	}
	for name, comp := range h.Components {
		if name != "acemq" {
			line += fmt.Sprintf(" %s=%s", name, comp.Status)
		}
	}
	return line
}

func newHealth() *cobra.Command {
	var u, actuator string
	cmd := &cobra.Command{
		Use:   "health",
		Short: "One line and an exit code: UP 0, DOWN 1, DEGRADED 2",
		Long: "Print one health line and exit UP 0, DOWN 1, DEGRADED 2. With --actuator it reads a running service's " +
			"/acemq-health (contract §6); otherwise it connects to --url and reports that connection's health the same way.",
		Example: `  acemq health --url amqp://guest:guest@localhost:5672/
  acemq health --actuator http://127.0.0.1:9464/acemq-health`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
			defer cancel()
			var h healthBody
			var err error
			if actuator != "" {
				h, err = fetchHealth(ctx, actuator)
			} else {
				h, err = connHealth(ctx, u)
			}
			if err != nil {
				fmt.Fprintln(cmd.OutOrStdout(), "DOWN")
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), safetext.Line(healthLine(h)))
			if code := healthExit(h.Status); code != 0 {
				return &exitCodeError{code: code}
			}
			return nil
		},
	}
	urlFlag(cmd, &u)
	cmd.Flags().StringVar(&actuator, "actuator", "", "a running service's health URL, e.g. http://127.0.0.1:9464/acemq-health")
	return cmd
}

// fetchHealth reads an actuator's health endpoint; 503 carries a DOWN body.
func fetchHealth(ctx context.Context, endpoint string) (healthBody, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return healthBody{}, fmt.Errorf("the actuator URL %q does not parse; pass --actuator http://host:9464/acemq-health", endpoint)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return healthBody{}, fmt.Errorf("the actuator at %s did not answer (%v); check that the service runs and serves its actuator there", endpoint, err)
	}
	defer resp.Body.Close()
	var h healthBody
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || h.Status == "" {
		return healthBody{}, fmt.Errorf("the answer from %s (%s) is not an AceMQ health report; point --actuator at the service's /acemq-health", endpoint, resp.Status)
	}
	return h, nil
}
