// Command acemq is AceMQ for Go's command: the demo (the main job) and the
// operator's tools.
//
//	go run ./cmd/acemq demo               # the order flow on the in-process broker
//	go run ./cmd/acemq demo --url amqp://guest:guest@localhost:5672/
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "acemq:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "acemq",
		Short:         "AceMQ for Go: the demo and the operator's tools",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDemo())
	return root
}
