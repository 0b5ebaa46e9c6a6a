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

// TestPartitionShort is the partition drill's short run: every fault once
// on the cluster scripts/netcluster.sh made (`make drill-partition-short`,
// which make test runs). It fails when a confirmed id is lost.
func TestPartitionShort(t *testing.T) {
	urls := os.Getenv("ACEMQ_PART_URLS")
	if urls == "" {
		t.Fatal("ACEMQ_PART_URLS is not set: run this through `make drill-partition-short`, which makes the cluster")
	}
	cl := Cluster{URLs: strings.Split(urls, ","), Net: strings.Fields(os.Getenv("ACEMQ_PART_NET")), Version: os.Getenv("ACEMQ_PART_VERSION"), Progress: os.Stderr}
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
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	r := Partition(ctx, cl, o)
	fmt.Println(r.Line())
	if !r.OK() {
		t.Fatal(r.Line())
	}
}
