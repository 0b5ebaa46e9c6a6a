package claimcheck

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

func newCodec(t *testing.T, inner acemq.Codec, s Store, opts ...Option) *Codec {
	t.Helper()
	c, err := New(inner, s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBodiesFromTheThresholdUpAreOffloadedAndSmallerOnesFramedInline(t *testing.T) {
	s := NewMemoryStore()
	c := newCodec(t, acemq.Bytes(), s)
	for _, n := range []int{0, 1, DefaultThreshold - 1, DefaultThreshold, DefaultThreshold + 1} {
		payload := bytes.Repeat([]byte{'z'}, n)
		body, err := c.Encode(payload)
		if err != nil {
			t.Fatal(err)
		}
		key, offloaded := KeyOf(body)
		if offloaded != (n >= DefaultThreshold) {
			t.Fatalf("%d bytes: offloaded = %v", n, offloaded)
		}
		if offloaded {
			if !bytes.Equal(body[:3], []byte{0xac, 1, 1}) || string(body[3:]) != key || len(body) >= 100 {
				t.Fatalf("%d bytes: body %q", n, body)
			}
		} else if !bytes.Equal(body[:3], []byte{0xac, 1, 0}) || !bytes.Equal(body[3:], payload) {
			t.Fatalf("%d bytes: inline body is not AC 01 00 + payload", n)
		}
		var got []byte
		if err := c.Decode("application/octet-stream", body, &got); err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("%d bytes: decoded %d bytes, %v", n, len(got), err)
		}
	}
	if s.Len() != 2 {
		t.Fatalf("the store holds %d payloads, want 2", s.Len())
	}
	if c.ContentType() != "application/octet-stream" || !c.Claims("image/png") || c.Name() != "claimcheck(bytes)" {
		t.Fatal("the content type and claims are not the inner codec's")
	}
}

func TestUnframedBodiesGoToTheInnerCodecAsTheyAre(t *testing.T) {
	c := newCodec(t, acemq.JSON(), NewMemoryStore(), WithThreshold(10))
	for _, body := range []string{`{"a":1}`, "\xac\x01", "\xac\x02\x00{}", "\xac\x01\x07{}"} {
		var v any
		err := c.Decode("application/json", []byte(body), &v)
		var direct any
		directErr := acemq.JSON().Decode("application/json", []byte(body), &direct)
		if (err == nil) != (directErr == nil) {
			t.Fatalf("%q: claim check %v, json %v", body, err, directErr)
		}
	}
}

func TestMissingPayloadIsFatalNamingTheKey(t *testing.T) {
	s := NewMemoryStore()
	c := newCodec(t, acemq.JSON(), s, WithThreshold(1))
	body, err := c.Encode(map[string]int{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := KeyOf(body)
	if err := s.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	var v any
	err = c.Decode("application/json", body, &v)
	if !acemq.IsFatal(err) || acemq.IsRetryable(err) || !strings.Contains(err.Error(), `no payload under key "`+key+`"`) ||
		!strings.Contains(err.Error(), "retention must outlive") {
		t.Fatalf("err = %v", err)
	}
	if !strings.HasPrefix(err.Error(), `acemq: the claimcheck(json) codec cannot read a body with content type "application/json": `) {
		t.Fatalf("err %q does not name the codec and content type", err)
	}
	for _, bad := range [][]byte{{0xac, 1, 1}, append([]byte{0xac, 1, 1}, "../etc/passwd"...), {0xac, 1, 1, 0xff}} {
		if err := c.Decode("application/json", bad, &v); !acemq.IsFatal(err) {
			t.Errorf("%q: err = %v, want fatal", bad, err)
		}
	}
}

// faultyStore fails or hangs reads.
type faultyStore struct {
	Store
	getErr error
	hang   bool
	putErr error
}

func (f faultyStore) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if f.hang {
		<-ctx.Done()
		return nil, false, ctx.Err()
	}
	if f.getErr != nil {
		return nil, false, f.getErr
	}
	return f.Store.Get(ctx, key)
}

func (f faultyStore) Put(ctx context.Context, p []byte) (string, error) {
	if f.putErr != nil {
		return "", f.putErr
	}
	return f.Store.Put(ctx, p)
}

func TestStoreReadErrorsAndTimeoutsAreRetryable(t *testing.T) {
	mem := NewMemoryStore()
	body, err := newCodec(t, acemq.JSON(), mem, WithThreshold(1)).Encode("x")
	if err != nil {
		t.Fatal(err)
	}
	var v any
	err = newCodec(t, acemq.JSON(), faultyStore{Store: mem, getErr: errors.New("connection reset")}).Decode("application/json", body, &v)
	if !acemq.IsRetryable(err) || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("read error: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err = newCodec(t, acemq.JSON(), faultyStore{Store: mem, hang: true}).DecodeContext(ctx, "application/json", body, &v)
	if !acemq.IsRetryable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging store: %v", err)
	}
}

func TestStorePutFailureFailsTheEncode(t *testing.T) {
	c := newCodec(t, acemq.JSON(), faultyStore{Store: NewMemoryStore(), putErr: errors.New("disk full")}, WithThreshold(1))
	_, err := c.Encode("x")
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("err = %v", err)
	}
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for name, f := range map[string]func() (*Codec, error){
		"nil inner":    func() (*Codec, error) { return New(nil, NewMemoryStore()) },
		"nil store":    func() (*Codec, error) { return New(acemq.JSON(), nil) },
		"threshold 0":  func() (*Codec, error) { return New(acemq.JSON(), NewMemoryStore(), WithThreshold(0)) },
		"put timeout0": func() (*Codec, error) { return New(acemq.JSON(), NewMemoryStore(), WithPutTimeout(0)) },
	} {
		if _, err := f(); err == nil || !strings.HasPrefix(err.Error(), "acemq: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// FuzzDecode feeds arbitrary bodies to the claim-check reader over a
// store holding one payload: no panic, an inline frame decodes to exactly
// its rest, and nothing allocates more than the body (a key is never
// trusted to size anything).
func FuzzDecode(f *testing.F) {
	s := NewMemoryStore()
	key, _ := s.Put(context.Background(), []byte("stored"))
	for _, seed := range [][]byte{
		{0xac, 1, 0}, append([]byte{0xac, 1, 0}, "inline"...), append([]byte{0xac, 1, 1}, key...),
		{0xac, 1, 1}, append([]byte{0xac, 1, 1}, "../x"...), {0xac, 1}, {0xac, 2, 0}, {}, []byte("plain"),
	} {
		f.Add(seed)
	}
	c, err := New(acemq.Bytes(), s)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got []byte
		err := c.Decode("application/octet-stream", body, &got)
		if len(body) >= 3 && body[0] == 0xac && body[1] == 1 && body[2] == 0 && (err != nil || !bytes.Equal(got, body[3:])) {
			t.Fatalf("inline frame: %q, %v", got, err)
		}
		if err == nil && len(got) > len(body) && string(got) != "stored" {
			t.Fatalf("decoded %d bytes from a %d-byte body", len(got), len(body))
		}
	})
}

func TestZeroMemoryStoreWorks(t *testing.T) {
	var s MemoryStore
	key, err := s.Put(context.Background(), []byte("p"))
	if err != nil {
		t.Fatal(err)
	}
	if got, found, err := s.Get(context.Background(), key); err != nil || !found || string(got) != "p" {
		t.Fatalf("Get = %q %v %v", got, found, err)
	}
}
