package memory

import "sync"

// The registry of named brokers is part of the memory:// scheme: one broker
// per name per process.
var (
	brokersMu sync.Mutex
	brokers   = map[string]*Broker{}
)

// Lookup returns the broker called name, creating it if it does not exist.
// It is safe for concurrent use; every caller with the same name gets the
// same *Broker until Delete.
func Lookup(name string) *Broker {
	brokersMu.Lock()
	defer brokersMu.Unlock()
	b, ok := brokers[name]
	if !ok {
		b = newBroker(name)
		brokers[name] = b
	}
	return b
}

// Delete forgets the broker called name and closes its connections with
// 320 CONNECTION_FORCED, as a broker shutdown would. A later Lookup or Dial
// of the same name starts an empty broker. Deleting an unknown name does
// nothing. It is safe for concurrent use.
func Delete(name string) {
	brokersMu.Lock()
	b, ok := brokers[name]
	delete(brokers, name)
	brokersMu.Unlock()
	if ok {
		b.DropConnections()
	}
}
