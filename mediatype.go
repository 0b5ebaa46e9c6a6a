package acemq

import "strings"

// mediaType reduces a content type to the part codecs compare (contract
// §2.1): parameters after ";" dropped, surrounding space trimmed, lower
// case. An absent content type gives "".
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// hasStructuredSuffix reports whether the media type mt is
// type/subtype+suffix with a non-empty type and subtype before the suffix,
// such as application/vnd.acme.order+json for "+json".
func hasStructuredSuffix(mt, suffix string) bool {
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok || typ == "" || strings.Contains(sub, "/") {
		return false
	}
	return len(sub) > len(suffix) && strings.HasSuffix(sub, suffix)
}
