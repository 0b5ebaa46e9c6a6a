package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/acemq-go/acemq/actuator"
)

// connHealth connects to the broker and asks the actuator's health check
// about that connection (in process, the same handler a service serves on
// /acemq-health). A broker that cannot be reached is an error.
func connHealth(ctx context.Context, u string) (healthBody, error) {
	c, err := connect(ctx, u, "acemq-health")
	if err != nil {
		return healthBody{}, err
	}
	defer closeConn(c)
	h, err := actuator.Handler(c)
	if err != nil {
		return healthBody{}, err
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, actuator.DefaultHealthPath, nil)
	h.ServeHTTP(rec, req)
	var body healthBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Status == "" {
		return healthBody{}, fmt.Errorf("the actuator's health check answered %d without a health report; this is a bug, please report it", rec.Code)
	}
	return body, nil
}
