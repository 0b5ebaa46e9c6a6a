package rabbitmq

import (
	"math"
	"net/url"
	"reflect"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq-go/acemq/internal/testenv"
	"github.com/acemq-go/acemq/transport"
)

// Every integer header reaches another client with its exact value and a
// signed type every family client reads, whichever path wrote it
// (frames=native or frames=amqp091, coalescing or not): read back here
// through amqp091-go's own Table. frames=amqp091 wrote an int past 32 bits
// as a 32-bit 'I' (2147483648 arrived as -2147483648, 1<<40 as 0), and
// both paths wrote unsigned values as 'B', 'u' and 'i', which bunny
// cannot read.
func TestIntegerHeadersArriveExactAndSignedOnEveryPath(t *testing.T) {
	headers := transport.Table{
		"int31":  int(1) << 31,
		"int40":  int(1) << 40,
		"int53":  int(1)<<53 + 1,
		"neg40":  -(int(1) << 40),
		"small":  int(-7),
		"u8":     uint8(200),
		"u16":    uint16(65000),
		"u32":    uint32(4000000000),
		"u":      uint(9),
		"u64":    uint64(math.MaxInt64),
		"nested": transport.Table{"int40": int(1) << 40, "list": []any{uint8(1), int(1) << 33}},
	}
	want := amqp.Table{
		"int31":  int64(1) << 31,
		"int40":  int64(1) << 40,
		"int53":  int64(1)<<53 + 1,
		"neg40":  -(int64(1) << 40),
		"small":  int32(-7),
		"u8":     int16(200),
		"u16":    int32(65000),
		"u32":    int64(4000000000),
		"u":      int64(9),
		"u64":    int64(math.MaxInt64),
		"nested": amqp.Table{"int40": int64(1) << 40, "list": []any{int16(1), int64(1) << 33}},
	}
	rch := testenv.RawChannel(t, testenv.AMQPURL(t))
	for _, setting := range []string{"frames=native", "frames=native&coalesce=off", "frames=amqp091", "frames=amqp091&coalesce=off"} {
		t.Run(setting, func(t *testing.T) {
			u := withQuery(t, testenv.AMQPURL(t), setting)
			c := dial(t, transport.Config{URL: u})
			q := tempQueue(t, c, "rabbit.ints", nil)
			p := openPublisher(t, c)
			if got := confirmOne(t, p, &transport.Message{RoutingKey: q, Properties: transport.Properties{Headers: headers}}); got.Outcome != transport.Acked {
				t.Fatalf("publish: %+v", got)
			}
			d := getRaw(t, rch, q)
			if !reflect.DeepEqual(d.Headers, want) {
				t.Fatalf("%s: headers read by amqp091-go:\n got %#v\nwant %#v", setting, d.Headers, want)
			}
		})
	}
}

// withQuery adds the settings in query ("frames=amqp091&coalesce=off") to
// a broker URL.
func withQuery(t testing.TB, raw, query string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	add, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, v := range add {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	return u.String()
}
