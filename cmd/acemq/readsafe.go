package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/acemq-go/acemq/cmd/acemq/internal/safetext"
	"github.com/acemq-go/acemq/replay"
)

// readFlags are the settings of a command that reads a queue by taking
// messages and handing them back (dlq show, dlq replay's duplicate check
// and filter, tail): where the broker and the queue say that would move
// messages toward a delivery limit (replay.Inspect), the command reads
// nothing unless --unsafe-read.
type readFlags struct {
	mgmt   string
	unsafe bool
}

func (f *readFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.mgmt, "management-url", os.Getenv("ACEMQ_MANAGEMENT_URL"),
		"RabbitMQ management API, asked for the queue's type, arguments and policies before a read (default $ACEMQ_MANAGEMENT_URL, else --url's host and credentials on port 15672)")
	cmd.Flags().BoolVar(&f.unsafe, "unsafe-read", false,
		"read even where handing the messages back counts a delivery toward the queue's delivery limit (a quorum queue with a limit before RabbitMQ 4.3), or where that cannot be learned: each message read counts one delivery")
}

// options are the replay options of a read on the broker at u.
func (f *readFlags) options(u string) []replay.Option {
	opts := managementOptions(u, f.mgmt)
	if f.unsafe {
		opts = append(opts, replay.AllowUnsafeRead())
	}
	return opts
}

// unsafeReadError turns a refused read into the command's sentence, or
// returns err as it is.
func unsafeReadError(err error) error {
	var u *replay.UnsafeReadError
	if !errors.As(err, &u) {
		return err
	}
	return fmt.Errorf("not reading %s: %s; nothing was read. Pass --unsafe-read to read it anyway (each message read then counts one delivery)",
		safetext.Line(u.Access.Queue), safetext.Line(u.Access.Why))
}
