// Package xml is the AceMQ XML codec (contract §2.1): it writes
// application/xml and reads application/xml, text/xml and any
// type/subtype+xml.
//
// Reading is safe: a document type declaration (<!DOCTYPE …>, and with it
// every entity definition and external entity) is refused, entities other
// than XML's five predefined ones are refused, nesting is limited to 256
// levels and a body must hold exactly one root element.
//
// Lists decode in both shapes the AceMQ family writes: repeated siblings
// (`<lines>a</lines><lines>b</lines>`, as encoding/xml writes) and a
// wrapping element (`<lines><lines>a</lines><lines>b</lines></lines>` or
// `<lines><line>a</line>…</lines>`, as Java's Jackson writes). Into a
// struct the target's slice fields decide; into *any or a map, an element
// whose children all share one name, and are two or more or carry the
// element's own name, is a list. Values read into *any or a map are text
// (strings): XML has no numbers.
//
// It uses encoding/xml only.
//
// The manual's page on codecs: https://github.com/acemq-go/acemq/blob/main/docs/codecs.md
package xml

import (
	"bytes"
	stdxml "encoding/xml"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/internal/codecutil"
)

// ContentType is what the codec writes.
const ContentType = "application/xml"

// MapRoot is the root element a map payload is written under.
const MapRoot = "message"

const maxDepth = 256

// New returns the XML codec. It is safe for concurrent use.
//
// Encode writes a struct (or pointer to one) with encoding/xml, and a map
// with string keys as <message> holding one element per key, in key
// order, with slices as repeated siblings. Decode fills any non-nil
// pointer encoding/xml accepts, and also *any and *map[string]any (values
// are strings, lists []any, nested elements maps). A body that is not
// safe, well-formed XML or does not fit the target is an error naming the
// codec and the content type, so the consumer parks it with that reason.
func New() acemq.Codec { return codec{} }

type codec struct{}

func (codec) Name() string        { return "xml" }
func (codec) ContentType() string { return ContentType }

func (codec) Claims(contentType string) bool {
	return acemq.MatchesMediaType(contentType, "+xml", "application/xml", "text/xml")
}

func (codec) Encode(v any) (b []byte, err error) {
	defer codecutil.Recover("xml", fmt.Sprintf("encode %T", v), &err)
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			break
		}
		rv = rv.Elem()
	}
	switch {
	case !rv.IsValid() || (rv.Kind() == reflect.Pointer && rv.IsNil()):
		return nil, fmt.Errorf("acemq: the xml codec cannot encode nil; send a struct or a map with string keys")
	case rv.Kind() == reflect.Map:
		return encodeMap(rv)
	case rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array:
		return nil, fmt.Errorf("acemq: the xml codec cannot encode %T: an XML document has one root element; wrap the list in a struct", v)
	}
	b, err = stdxml.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("acemq: the xml codec cannot encode %T: %w; send a value encoding/xml can marshal or choose another codec", v, err)
	}
	return b, nil
}

func (codec) Decode(contentType string, data []byte, v any) (err error) {
	if err := codecutil.Target("xml", v); err != nil {
		return err
	}
	defer codecutil.Recover("xml", "decode a body with "+codecutil.Describe(contentType), &err)
	root, err := parse(data)
	if err != nil {
		return codecutil.DecodeError("xml", contentType, v, err)
	}
	switch x := v.(type) {
	case *any:
		*x = root.value()
		return nil
	case *map[string]any:
		m, ok := root.value().(map[string]any)
		if !ok {
			m = map[string]any{}
			if s, _ := root.value().(string); s != "" {
				m[""] = s
			}
		}
		*x = m
		return nil
	}
	t := reflect.TypeOf(v).Elem()
	if root.normalise(t) {
		var buf bytes.Buffer
		enc := stdxml.NewEncoder(&buf)
		if err := root.write(enc); err != nil {
			return codecutil.DecodeError("xml", contentType, v, err)
		}
		if err := enc.Flush(); err != nil {
			return codecutil.DecodeError("xml", contentType, v, err)
		}
		data = buf.Bytes()
	}
	if err := stdxml.Unmarshal(data, v); err != nil {
		return codecutil.DecodeError("xml", contentType, v, err)
	}
	return nil
}

// node is one element of a parsed document.
type node struct {
	name stdxml.Name
	attr []stdxml.Attr
	kids []*node
	text []byte
}

var errDTD = errors.New("it carries a document type declaration (<!DOCTYPE or <!ENTITY); DTDs and external entities are refused")

// parse reads exactly one root element, refusing DTDs, unknown entities
// and nesting deeper than maxDepth.
func parse(data []byte) (*node, error) {
	d := stdxml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var root *node
	var stack []*node
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case stdxml.Directive:
			return nil, errDTD
		case stdxml.StartElement:
			if len(stack) == 0 && root != nil {
				return nil, errors.New("it holds more than one root element")
			}
			if len(stack) >= maxDepth {
				return nil, fmt.Errorf("it nests deeper than %d elements", maxDepth)
			}
			n := &node{name: t.Name, attr: append([]stdxml.Attr(nil), t.Attr...)}
			if len(stack) == 0 {
				root = n
			} else {
				p := stack[len(stack)-1]
				p.kids = append(p.kids, n)
			}
			stack = append(stack, n)
		case stdxml.EndElement:
			if len(stack) == 0 || stack[len(stack)-1].name != t.Name {
				return nil, fmt.Errorf("element </%s> closes nothing open", t.Name.Local)
			}
			stack = stack[:len(stack)-1]
		case stdxml.CharData:
			if len(stack) > 0 {
				n := stack[len(stack)-1]
				n.text = append(n.text, t...)
			} else if len(bytes.TrimSpace(t)) > 0 {
				return nil, errors.New("it has text outside the root element")
			}
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("it ends inside element <%s>", stack[len(stack)-1].name.Local)
	}
	if root == nil {
		return nil, errors.New("it holds no element")
	}
	return root, nil
}

func (n *node) hasText() bool { return len(bytes.TrimSpace(n.text)) > 0 }

// listOf reports the shared name of n's children when n only wraps them.
func (n *node) wrapped() (string, bool) {
	if len(n.kids) == 0 || len(n.attr) > 0 || n.hasText() {
		return "", false
	}
	name := n.kids[0].name.Local
	for _, k := range n.kids[1:] {
		if k.name.Local != name {
			return "", false
		}
	}
	return name, true
}

// value is n's generic form: text for a leaf, []any for a wrapping
// element, otherwise a map of attributes and children (repeated children
// as []any).
func (n *node) value() any {
	if len(n.kids) == 0 && len(n.attr) == 0 {
		return string(n.text)
	}
	if name, ok := n.wrapped(); ok && (len(n.kids) > 1 || name == n.name.Local) {
		list := make([]any, len(n.kids))
		for i, k := range n.kids {
			list[i] = k.value()
		}
		return list
	}
	m := make(map[string]any, len(n.kids)+len(n.attr))
	for _, a := range n.attr {
		m[a.Name.Local] = a.Value
	}
	count := make(map[string]int, len(n.kids))
	for _, k := range n.kids {
		count[k.name.Local]++
	}
	for _, k := range n.kids {
		key := k.name.Local
		if count[key] == 1 {
			m[key] = k.value()
			continue
		}
		list, _ := m[key].([]any)
		m[key] = append(list, k.value())
	}
	if n.hasText() {
		m[""] = string(n.text)
	}
	return m
}

// normalise rewrites wrapped lists into repeated siblings where the
// target type t has a slice for them, so encoding/xml reads both shapes.
// It reports whether anything changed.
func (n *node) normalise(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	fields := elementFields(t, nil)
	changed := false
	kids := make([]*node, 0, len(n.kids))
	for _, k := range n.kids {
		ft, ok := fields[k.name.Local]
		if !ok {
			kids = append(kids, k)
			continue
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
			elem := ft.Elem()
			if name, ok := k.wrapped(); ok && !isField(elem, name) {
				for _, item := range k.kids {
					item.name = k.name
					item.normalise(elem)
					kids = append(kids, item)
				}
				changed = true
				continue
			}
			ft = elem
		}
		if k.normalise(ft) {
			changed = true
		}
		kids = append(kids, k)
	}
	n.kids = kids
	return changed
}

// isField reports whether a struct type t has an element field called
// name: then a child of that name is the item itself, not a list item.
func isField(t reflect.Type, name string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	_, ok := elementFields(t, nil)[name]
	return ok
}

// elementFields maps the element names of t's fields (as encoding/xml
// reads them) to their types; attributes, character data and paths
// ("a>b", which encoding/xml already reads as a wrapper) are left out.
func elementFields(t reflect.Type, into map[string]reflect.Type) map[string]reflect.Type {
	if into == nil {
		into = map[string]reflect.Type{}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("xml")
		if tag == "-" || f.Name == "XMLName" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			elementFields(f.Type, into)
			continue
		}
		if !f.IsExported() || opts != "" && opts != "omitempty" || strings.Contains(name, ">") {
			continue
		}
		if i := strings.LastIndexByte(name, ' '); i >= 0 {
			name = name[i+1:] // "namespace local"
		}
		if name == "" {
			name = f.Name
		}
		into[name] = f.Type
	}
	return into
}

// write encodes n back to XML (namespaces dropped: encoding/xml matches
// untagged-namespace fields by local name).
func (n *node) write(enc *stdxml.Encoder) error {
	start := stdxml.StartElement{Name: stdxml.Name{Local: n.name.Local}}
	for _, a := range n.attr {
		if a.Name.Space == "xmlns" || a.Name.Local == "xmlns" {
			continue
		}
		start.Attr = append(start.Attr, stdxml.Attr{Name: stdxml.Name{Local: a.Name.Local}, Value: a.Value})
	}
	if err := enc.EncodeToken(start); err != nil {
		return err
	}
	if len(n.text) > 0 {
		if err := enc.EncodeToken(stdxml.CharData(n.text)); err != nil {
			return err
		}
	}
	for _, k := range n.kids {
		if err := k.write(enc); err != nil {
			return err
		}
	}
	return enc.EncodeToken(start.End())
}

// encodeMap writes a map with string keys under <message>.
func encodeMap(rv reflect.Value) ([]byte, error) {
	var buf bytes.Buffer
	enc := stdxml.NewEncoder(&buf)
	if err := writeValue(enc, MapRoot, rv, 0); err != nil {
		return nil, err
	}
	if err := enc.Flush(); err != nil {
		return nil, fmt.Errorf("acemq: the xml codec cannot encode the map: %w", err)
	}
	return buf.Bytes(), nil
}

func writeValue(enc *stdxml.Encoder, name string, rv reflect.Value, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("acemq: the xml codec cannot encode a value nested deeper than %d levels", maxDepth)
	}
	for rv.Kind() == reflect.Interface || rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return enc.EncodeElement("", stdxml.StartElement{Name: stdxml.Name{Local: name}})
		}
		rv = rv.Elem()
	}
	start := stdxml.StartElement{Name: stdxml.Name{Local: name}}
	switch rv.Kind() {
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("acemq: the xml codec cannot encode a map with %s keys; XML element names are strings", rv.Type().Key())
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		if err := enc.EncodeToken(start); err != nil {
			return err
		}
		for _, k := range keys {
			if !validName(k) {
				return fmt.Errorf("acemq: the xml codec cannot encode the map key %q: it is not an XML element name", k)
			}
			if err := writeValue(enc, k, rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())), depth+1); err != nil {
				return err
			}
		}
		return enc.EncodeToken(start.End())
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
			return enc.EncodeElement(rv.Bytes(), start)
		}
		for i := range rv.Len() {
			if err := writeValue(enc, name, rv.Index(i), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := enc.EncodeElement(rv.Interface(), start); err != nil {
		return fmt.Errorf("acemq: the xml codec cannot encode the value at <%s>: %w", name, err)
	}
	return nil
}

// validName reports whether s can be an XML element name (ASCII letters,
// digits, '_', '-', '.'; starting with a letter or '_'; not "xml…").
func validName(s string) bool {
	if s == "" || strings.HasPrefix(strings.ToLower(s), "xml") {
		return false
	}
	for i, r := range s {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 0x7f
		if i == 0 && !letter {
			return false
		}
		if !letter && !(r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
