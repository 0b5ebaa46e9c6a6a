package ordered

import (
	"context"
	"errors"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/brokertest"
)

// The contract's table (§3.9): FNV-1a, and the partition for n = 8, 3, 5
// with Java's signed floorMod beside the unsigned remainder it must not be.
func TestPartitionsAreTheContractsTable(t *testing.T) {
	for _, c := range []struct {
		key                  string
		fnv                  uint32
		n8, n3, n3u, n5, n5u int
	}{
		{"", 0x811c9dc5, 5, 0, 1, 0, 1},
		{"a", 0xe40c292c, 4, 0, 1, 4, 0},
		{"o-1", 0xf5906368, 0, 0, 1, 1, 2},
	} {
		h := fnv.New32a()
		h.Write([]byte(c.key))
		if h.Sum32() != c.fnv {
			t.Fatalf("%q: FNV-1a %08x, want %08x", c.key, h.Sum32(), c.fnv)
		}
		for n, want := range map[int]int{8: c.n8, 3: c.n3, 5: c.n5} {
			if got := Partition(c.key, n); got != want {
				t.Errorf("Partition(%q, %d) = %d, want %d", c.key, n, got, want)
			}
		}
		if int(c.fnv%3) != c.n3u || int(c.fnv%5) != c.n5u {
			t.Fatalf("the table's unsigned column for %q disagrees with %% (test data wrong)", c.key)
		}
	}
}

func TestPartitionStaysInRange(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 8, 13} {
		for _, k := range []string{"", "a", "o-1", "ü", strings.Repeat("x", 1000)} {
			if p := Partition(k, n); p < 0 || p >= n {
				t.Fatalf("Partition(%q, %d) = %d", k, n, p)
			}
		}
	}
}

func TestTheLayoutIsTheContracts(t *testing.T) {
	top, err := Topology("orders", 3)
	if err != nil {
		t.Fatal(err)
	}
	desc := top.Describe()
	for _, want := range []string{"orders.p0", "orders.p1", "orders.p2", "p2"} {
		if !strings.Contains(desc, want) {
			t.Errorf("the topology lacks %s:\n%s", want, desc)
		}
	}
	if strings.Contains(desc, "x-single-active-consumer") {
		t.Errorf("the default partition queues carry an argument the contract does not give:\n%s", desc)
	}
	sac, _ := Topology("orders", 2, SingleActiveConsumer())
	if !strings.Contains(sac.Describe(), "x-single-active-consumer") {
		t.Errorf("SingleActiveConsumer did not reach the declaration:\n%s", sac.Describe())
	}
	var ce *acemq.ConfigurationError
	if _, err := Topology("orders", 0); !errors.As(err, &ce) {
		t.Fatalf("0 partitions: %v", err)
	}
}

func TestSendRoutesEachKeyToItsPartition(t *testing.T) {
	brokertest.ForEachBroker(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		name := "ordered-" + strings.ReplaceAll(t.Name(), "/", "-")
		top, err := Topology(name, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(context.Background(), top); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for p := range 3 {
				_, _ = c.DeleteQueue(context.Background(), Queue(name, p))
			}
		})
		keys := []string{"", "a", "o-1", "o-2", "o-3", "o-4"}
		want := map[int]int{}
		for _, k := range keys {
			if _, err := Send(context.Background(), c, name, 3, k, map[string]string{"key": k}, acemq.SendOptions{}); err != nil {
				t.Fatal(err)
			}
			want[Partition(k, 3)]++
		}
		for p := range 3 {
			if got := brokertest.Depth(t, c, Queue(name, p)); got != want[p] {
				t.Errorf("partition %d holds %d messages, want %d", p, got, want[p])
			}
		}
		// Told of 4 partitions where 3 exist, a key of partition 3 has
		// nowhere to go: an unroutable error, not a silent loss.
		k := "k"
		for Partition(k, 4) != 3 {
			k += "k"
		}
		if _, err := Send(context.Background(), c, name, 4, k, "x", acemq.SendOptions{}); !acemq.IsUnroutable(err) {
			t.Fatalf("a send to a partition that does not exist: %v", err)
		}
	})
}
