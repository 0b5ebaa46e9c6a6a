package acemq

import "strings"

// MediaType reduces a content type to the part codecs compare (contract
// §2.1): parameters after ";" dropped, surrounding space trimmed, lower
// case. An absent content type gives "". A codec's Claims should compare
// MediaType's result, or call MatchesMediaType, rather than the raw header.
func MediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// MatchesMediaType reports whether contentType, reduced by MediaType, is
// one of mediaTypes (given in lower case, without parameters) or, when
// suffix is not empty, a structured-syntax type with that suffix: "+xml"
// matches application/vnd.acme.order+xml but not "+xml" or "x/+xml". An
// absent content type matches nothing; only the JSON codec claims it, and
// does so itself.
//
// This is the §2.1 rule every codec shares; user codecs call it so that
// they read content types exactly as the built-in ones do.
func MatchesMediaType(contentType, suffix string, mediaTypes ...string) bool {
	mt := MediaType(contentType)
	if mt == "" {
		return false
	}
	for _, want := range mediaTypes {
		if mt == want {
			return true
		}
	}
	return suffix != "" && hasStructuredSuffix(mt, suffix)
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
