package rpc

import (
	"fmt"
)

// rawCodec hands the reply consumer the body untouched; Request decodes it
// into the caller's type with the Conn's codec, by content type.
type rawCodec struct{}

func (rawCodec) Name() string        { return "rpc-raw" }
func (rawCodec) ContentType() string { return "application/octet-stream" }
func (rawCodec) Claims(string) bool  { return true }
func (rawCodec) Encode(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("acemq: the reply consumer's codec encodes only []byte, not %T", v)
	}
	return b, nil
}
func (rawCodec) Decode(_ string, data []byte, v any) error {
	p, ok := v.(*reply)
	if !ok {
		return fmt.Errorf("acemq: the reply consumer's codec decodes only into its own reply type, not %T", v)
	}
	p.body = append([]byte(nil), data...)
	return nil
}
