package acemq

// Sent is what actually went on the wire: the envelope after interceptors,
// the destination and content type, and the outcome.
type Sent struct {
	Envelope    Envelope
	Exchange    string
	RoutingKey  string
	ContentType string
	// Outcome is "confirmed", or "published" when confirms are off.
	Outcome string
	// Mandatory is true when the publish was mandatory; it was then routed.
	Mandatory bool
}
