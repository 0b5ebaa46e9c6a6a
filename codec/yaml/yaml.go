// Package yaml is the AceMQ YAML codec (contract §2.1): it writes
// application/yaml and reads application/yaml, application/x-yaml,
// text/yaml, text/x-yaml and any type/subtype+yaml.
//
// Loading is safe only: a document is parsed to a node tree first and
// refused before anything is built when it carries a tag outside YAML's
// core schema (such as !!python/object or a custom !tag), nests deeper
// than 256 levels, or whose aliases would expand past 100 000 nodes (the
// "billion laughs" bomb). Only then is it decoded, into the caller's
// value. Tags never construct objects in Go; refusing them means a body a
// Python or Ruby reader would have treated as code is parked here too.
//
// It uses go.yaml.in/yaml/v3, the YAML organisation's maintained
// continuation of gopkg.in/yaml.v3 (which is no longer maintained).
//
// The manual's page on codecs: https://github.com/acemq-go/acemq/blob/main/docs/codecs.md
package yaml

import (
	"errors"
	"fmt"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/acemq-go/acemq"
	"github.com/acemq-go/acemq/codec/yaml/internal/codecutil"
)

// ContentType is what the codec writes.
const ContentType = "application/yaml"

// Limits on what a body may expand to before decoding is refused.
const (
	maxDepth = 256
	maxNodes = 100_000
)

// New returns the YAML codec. It is safe for concurrent use.
//
// Encode accepts anything go.yaml.in/yaml/v3 marshals (structs with yaml
// tags, maps, slices, scalars) and returns an error, never a panic, for
// what it cannot (channels, functions). Decode fills any non-nil pointer;
// into *any a mapping arrives as map[string]any when every key is a
// string. A body that is not safe YAML (see the package comment) or does
// not fit the target is an error naming the codec and the content type,
// so the consumer parks it with that reason.
func New() acemq.Codec { return codec{} }

type codec struct{}

func (codec) Name() string        { return "yaml" }
func (codec) ContentType() string { return ContentType }

func (codec) Claims(contentType string) bool {
	return acemq.MatchesMediaType(contentType, "+yaml",
		"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
}

func (codec) Encode(v any) (b []byte, err error) {
	defer codecutil.Recover("yaml", fmt.Sprintf("encode %T", v), &err)
	b, err = yamlv3.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("acemq: the yaml codec cannot encode %T: %w; send a value go.yaml.in/yaml/v3 can marshal or choose another codec", v, err)
	}
	return b, nil
}

func (codec) Decode(contentType string, data []byte, v any) (err error) {
	if err := codecutil.Target("yaml", v); err != nil {
		return err
	}
	defer codecutil.Recover("yaml", "decode a body with "+codecutil.Describe(contentType), &err)
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return codecutil.DecodeError("yaml", contentType, v, err)
	}
	if err := checkSafe(&doc); err != nil {
		return codecutil.DecodeError("yaml", contentType, v, err)
	}
	if doc.Kind == 0 {
		return nil // an empty document is null: the target is left as it is
	}
	if err := doc.Decode(v); err != nil {
		return codecutil.DecodeError("yaml", contentType, v, err)
	}
	return nil
}

// coreTags are the tags of YAML's core schema (resolved to their short
// form by the parser). Anything else would ask a loader to build a type.
var coreTags = map[string]bool{
	"": true, "!": true,
	"!!str": true, "!!int": true, "!!float": true, "!!bool": true, "!!null": true,
	"!!timestamp": true, "!!binary": true, "!!merge": true,
	"!!map": true, "!!seq": true,
}

// errBomb is the refusal of an alias bomb.
var errBomb = errors.New("its aliases expand past 100000 nodes (a \"billion laughs\" document); only safe YAML is loaded")

// checkSafe walks the document once, counting every node an alias would
// expand to (memoised per anchor, so the walk itself stays linear).
func checkSafe(doc *yamlv3.Node) error {
	w := walker{sizes: map[*yamlv3.Node]int{}}
	if _, err := w.size(doc, 0); err != nil {
		return err
	}
	return nil
}

type walker struct {
	sizes map[*yamlv3.Node]int
}

func (w *walker) size(n *yamlv3.Node, depth int) (int, error) {
	if n == nil {
		return 0, nil
	}
	if depth > maxDepth {
		return 0, fmt.Errorf("it nests deeper than %d levels; only safe YAML is loaded", maxDepth)
	}
	if s, ok := w.sizes[n]; ok {
		return s, nil
	}
	if !coreTags[n.Tag] {
		return 0, fmt.Errorf("the tag %s at line %d is refused: only YAML's core schema is loaded, never tags that name a type", n.Tag, n.Line)
	}
	w.sizes[n] = maxNodes + 1 // an alias cycle reached before this node is sized counts as a bomb
	total := 1
	if n.Kind == yamlv3.AliasNode {
		s, err := w.size(n.Alias, depth+1)
		if err != nil {
			return 0, err
		}
		total += s
	}
	for _, c := range n.Content {
		s, err := w.size(c, depth+1)
		if err != nil {
			return 0, err
		}
		total += s
		if total > maxNodes {
			return 0, errBomb
		}
	}
	if total > maxNodes {
		return 0, errBomb
	}
	w.sizes[n] = total
	return total, nil
}
