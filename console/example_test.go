package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/console"
)

// The console is an http.Handler: mount it beside the actuator (here on
// httptest), give it the Conn and a token, and open a one-time SignInLink in a browser
// (or sign in with the token on the page).
func ExampleNew() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-console", acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := conn.Apply(ctx, acemq.NewTopology().Queue("orders", acemq.QueueOptions{}).DeadLetters("orders")); err != nil {
		panic(err)
	}
	token, err := console.GenerateToken()
	if err != nil {
		panic(err)
	}
	h, err := console.New(conn, console.Config{URL: "memory://example-console", Token: token, ReadOnly: true})
	if err != nil {
		panic(err)
	}
	// In a service: actuator.ListenAndServe(ctx, "127.0.0.1:8080", h), or
	// mux.Handle("/console/", http.StripPrefix("/console", h)) with
	// Config.BasePath "/console".
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/overview", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	// Output: 200 application/json
}
