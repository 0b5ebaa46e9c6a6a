package acemq

import "github.com/acemq-go/acemq/transport"

// DelayedRetryArgumentsForTest exposes the queue arguments a policy that
// holds its waits in the queue declares, to the external tests.
func (p RetryPolicy) DelayedRetryArgumentsForTest() transport.Table { return p.delayedRetryArguments() }
