// Package codecutil holds the few lines every codec package under codec/
// shares: how a content type is named in an error, the decode-target check
// and the guard that turns a decoding library's panic into an error.
package codecutil

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Describe names a content type in an error message, as the built-in
// codecs do: `content type "application/xml"` or `an absent content type`.
func Describe(contentType string) string {
	if strings.TrimSpace(contentType) == "" {
		return "an absent content type"
	}
	return "content type " + strconv.Quote(contentType)
}

// Target refuses a decode target that is not a non-nil pointer, naming the
// codec.
func Target(codec string, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return nil
	}
	if v == nil {
		return fmt.Errorf("acemq: the %s codec cannot decode into nil; pass a non-nil pointer, such as &payload", codec)
	}
	return fmt.Errorf("acemq: the %s codec cannot decode into %T, which is not a non-nil pointer; pass a pointer, such as &payload", codec, v)
}

// DecodeError is the sentence every codec gives for a body it cannot
// read: it names the codec and the content type, so the reason on a
// parked message says which reader refused what.
func DecodeError(codec, contentType string, v any, err error) error {
	return fmt.Errorf("acemq: the %s codec cannot decode a body with %s into %T: %w; check what the publisher sent or decode into a matching type", codec, Describe(contentType), v, err)
}

// Recover turns a panic inside a third-party encoder or decoder into an
// error naming the codec and what it was doing, so bad input never
// crashes a consumer. Use as `defer codecutil.Recover("yaml", "encode", &err)`.
func Recover(codec, doing string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("acemq: the %s codec failed to %s: %v", codec, doing, r)
	}
}
