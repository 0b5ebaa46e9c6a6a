package rabbitmq

import (
	"encoding/binary"
	"fmt"
)

// The methods the publishing connection AceMQ owns (own.go) sends, besides
// basic.publish (frames.go), each appended to dst as one method frame.

const (
	methodConnectionStart    = 10
	methodConnectionStartOk  = 11
	methodConnectionTune     = 30
	methodConnectionTuneOk   = 31
	methodConnectionOpen     = 40
	methodConnectionOpenOk   = 41
	methodConnectionBlocked  = 60
	methodConnectionUnblock  = 61
	methodUpdateSecret       = 70
	methodUpdateSecretOk     = 71
	methodChannelOpen        = 10
	methodChannelOpenOk      = 11
	methodChannelFlow        = 20
	methodChannelFlowOk      = 21
	replySuccess             = 200
	frameMinSize             = 4096 // the smallest frame_max AMQP allows
	handshakeFrameMax        = 1 << 20
	defaultFrameMax          = 131072
	defaultChannelMaxRequest = 2047
)

// appendStartOk appends connection.start-ok: client properties, mechanism,
// response, locale.
func appendStartOk(dst []byte, props map[string]any, mechanism string, response []byte, locale string) ([]byte, error) {
	f := len(dst)
	dst = appendFrameHeader(dst, frameMethod, 0)
	dst = binary.BigEndian.AppendUint16(dst, classConnection)
	dst = binary.BigEndian.AppendUint16(dst, methodConnectionStartOk)
	var err error
	if dst, err = appendTable(dst, props, 0); err != nil {
		return dst[:f], fmt.Errorf("client property %w", err)
	}
	dst = appendShortstr(dst, mechanism)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(response)))
	dst = append(dst, response...)
	dst = appendShortstr(dst, locale)
	return endFrame(dst, f), nil
}

// appendTuneOk appends connection.tune-ok.
func appendTuneOk(dst []byte, channelMax uint16, frameMax uint32, heartbeat uint16) []byte {
	var a [8]byte
	binary.BigEndian.PutUint16(a[0:2], channelMax)
	binary.BigEndian.PutUint32(a[2:6], frameMax)
	binary.BigEndian.PutUint16(a[6:8], heartbeat)
	return appendMethodFrame(dst, 0, classConnection, methodConnectionTuneOk, a[:]...)
}

// appendOpen appends connection.open of vhost (reserved shortstr and bit
// after it).
func appendOpen(dst []byte, vhost string) []byte {
	f := len(dst)
	dst = appendFrameHeader(dst, frameMethod, 0)
	dst = binary.BigEndian.AppendUint16(dst, classConnection)
	dst = binary.BigEndian.AppendUint16(dst, methodConnectionOpen)
	dst = appendShortstr(dst, vhost)
	dst = append(dst, 0, 0) // reserved-1 (empty shortstr), reserved-2 (bit)
	return endFrame(dst, f)
}

// appendClose appends connection.close (ch 0) or channel.close with a
// reply code and text and no failing method.
func appendClose(dst []byte, ch uint16, code uint16, text string) []byte {
	class, method := uint16(classChannel), uint16(methodChannelClose)
	if ch == 0 {
		class, method = classConnection, methodConnectionClose
	}
	f := len(dst)
	dst = appendFrameHeader(dst, frameMethod, ch)
	dst = binary.BigEndian.AppendUint16(dst, class)
	dst = binary.BigEndian.AppendUint16(dst, method)
	dst = binary.BigEndian.AppendUint16(dst, code)
	dst = appendShortstr(dst, text)
	dst = append(dst, 0, 0, 0, 0)
	return endFrame(dst, f)
}

// appendCloseOk appends connection.close-ok (ch 0) or channel.close-ok.
func appendCloseOk(dst []byte, ch uint16) []byte {
	if ch == 0 {
		return appendMethodFrame(dst, 0, classConnection, methodConnectionCloseOk)
	}
	return appendMethodFrame(dst, ch, classChannel, methodCloseOk)
}

// appendUpdateSecret appends connection.update-secret: the new secret and
// a reason.
func appendUpdateSecret(dst []byte, secret, reason string) []byte {
	f := len(dst)
	dst = appendFrameHeader(dst, frameMethod, 0)
	dst = binary.BigEndian.AppendUint16(dst, classConnection)
	dst = binary.BigEndian.AppendUint16(dst, methodUpdateSecret)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(secret)))
	dst = append(dst, secret...)
	dst = appendShortstr(dst, reason)
	return endFrame(dst, f)
}

// appendChannelOpen appends channel.open (its reserved shortstr empty).
func appendChannelOpen(dst []byte, ch uint16) []byte {
	return appendMethodFrame(dst, ch, classChannel, methodChannelOpen, 0)
}

// appendConfirmSelect appends confirm.select, waiting for select-ok.
func appendConfirmSelect(dst []byte, ch uint16) []byte {
	return appendMethodFrame(dst, ch, classConfirm, methodConfirmSelect, 0)
}

// appendFlowOk answers channel.flow.
func appendFlowOk(dst []byte, ch uint16, active bool) []byte {
	var b byte
	if active {
		b = 1
	}
	return appendMethodFrame(dst, ch, classChannel, methodChannelFlowOk, b)
}
