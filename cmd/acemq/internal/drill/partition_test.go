//go:build drill

package drill

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPartition runs the partition drill on the cluster
// scripts/netcluster.sh made (`make drill-partition`, and
// `make drill-partition-short`: every fault once). ACEMQ_PART_SEED,
// ACEMQ_PART_ROUNDS, ACEMQ_PART_HOLD, ACEMQ_PART_LEADER_HOLD, ACEMQ_PART_FLAP,
// ACEMQ_PART_PAUSE, ACEMQ_PART_WAIT (the path's retry wait) and ACEMQ_PART_FAULTS
// (a comma-separated list of PartitionFaults) shape the run. It
// fails when a confirmed id on the quorum queue is lost, or a message on
// the replicated layout's path (a retry wait, {q}.dlq, {q}.parked).
func TestPartition(t *testing.T) {
	urls := os.Getenv("ACEMQ_PART_URLS")
	if urls == "" {
		t.Fatal("ACEMQ_PART_URLS is not set: run this through `make drill-partition-short`, which makes the cluster")
	}
	cl := Cluster{URLs: strings.Split(urls, ","), Net: strings.Fields(os.Getenv("ACEMQ_PART_NET")), Version: os.Getenv("ACEMQ_PART_VERSION"), Progress: os.Stderr}
	if m := os.Getenv("ACEMQ_PART_MGMT_URLS"); m != "" {
		cl.Management = strings.Split(m, ",")
	}
	for i := 1; i <= 3; i++ {
		cl.Ctls = append(cl.Ctls, strings.Fields(os.Getenv(fmt.Sprintf("ACEMQ_PART_CTL_%d", i))))
	}
	var o PartitionOptions
	if s := os.Getenv("ACEMQ_PART_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("ACEMQ_PART_SEED: %v", err)
		}
		o.Seed = seed
	}
	if s := os.Getenv("ACEMQ_PART_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("ACEMQ_PART_ROUNDS: %v", err)
		}
		o.Rounds = n
	}
	if s := os.Getenv("ACEMQ_PART_FAULTS"); s != "" {
		o.Faults = strings.Split(s, ",")
	}
	for name, d := range map[string]*time.Duration{"ACEMQ_PART_HOLD": &o.Hold, "ACEMQ_PART_LEADER_HOLD": &o.LeaderHold, "ACEMQ_PART_FLAP": &o.Flap, "ACEMQ_PART_PAUSE": &o.Pause, "ACEMQ_PART_WAIT": &o.Wait} {
		if s := os.Getenv(name); s != "" {
			v, err := time.ParseDuration(s)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			*d = v
		}
	}
	// The drill ends (and heals the network) before go test's -timeout
	// would kill it.
	limit := 55 * time.Minute
	if d, ok := t.Deadline(); ok {
		limit = time.Until(d) - 30*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	r := Partition(ctx, cl, o)
	fmt.Println(r.Line())
	if !r.OK() {
		t.Fatal(r.Line())
	}
}
