package schemas

import (
	"context"
	"fmt"
	"sync"
)

// Memory is a registry held in this process. The zero value is not
// usable; call NewMemory. It is safe for concurrent use; everything is
// lost when the process ends.
type Memory struct {
	cfg      config
	mu       sync.RWMutex
	next     uint32
	byID     map[uint32]Schema
	subjects map[string][]uint32
}

// NewMemory returns an empty in-memory registry; ids start at 1.
func NewMemory(opts ...Option) *Memory {
	return &Memory{cfg: newConfig(opts), next: 1, byID: map[uint32]Schema{}, subjects: map[string][]uint32{}}
}

// Register implements Registry.
func (m *Memory) Register(ctx context.Context, subject, format, definition string) (Schema, error) {
	fp := Fingerprint(definition)
	m.mu.Lock()
	defer m.mu.Unlock()
	var latest *Schema
	for _, id := range m.subjects[subject] {
		s := m.byID[id]
		if s.Fingerprint == fp {
			return s, nil
		}
		latest = &s
	}
	if err := m.cfg.check(subject, format, definition, latest); err != nil {
		return Schema{}, err
	}
	for m.byID[m.next].ID != 0 {
		m.next++
	}
	s := Schema{ID: m.next, Subject: subject, Version: 1, Format: format, Definition: definition,
		Fingerprint: fp, RegisteredAt: m.cfg.now().UTC()}
	if latest != nil {
		s.Version = latest.Version + 1
	}
	m.next++
	m.byID[s.ID] = s
	m.subjects[subject] = append(m.subjects[subject], s.ID)
	return s, nil
}

// Import records s under the id and version another registry gave it (to
// mirror schemas registered elsewhere, such as by another AceMQ library).
// Fingerprint and RegisteredAt are filled in when empty. Importing what is
// already there is a no-op; an id, or a subject and version, that holds a
// different definition is an error. Later registrations never reuse s.ID.
func (m *Memory) Import(ctx context.Context, s Schema) error {
	if s.ID == 0 || s.Version < 1 {
		return fmt.Errorf("acemq: cannot import schema %d version %d: ids and versions start at 1", s.ID, s.Version)
	}
	if err := m.cfg.check(s.Subject, s.Format, s.Definition, nil); err != nil {
		return err
	}
	s.Fingerprint = Fingerprint(s.Definition)
	if s.RegisteredAt.IsZero() {
		s.RegisteredAt = m.cfg.now().UTC()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.byID[s.ID]; ok {
		if old.Fingerprint == s.Fingerprint && old.Subject == s.Subject && old.Version == s.Version {
			return nil
		}
		return fmt.Errorf("acemq: cannot import schema id %d: the registry already holds a different schema under it", s.ID)
	}
	for _, id := range m.subjects[s.Subject] {
		if old := m.byID[id]; old.Version == s.Version || old.Fingerprint == s.Fingerprint {
			return fmt.Errorf("acemq: cannot import schema id %d: subject %q already holds version %d or these exact bytes (id %d)", s.ID, s.Subject, old.Version, old.ID)
		}
	}
	m.byID[s.ID] = s
	ids := append(m.subjects[s.Subject], s.ID)
	for i := len(ids) - 1; i > 0 && m.byID[ids[i]].Version < m.byID[ids[i-1]].Version; i-- {
		ids[i], ids[i-1] = ids[i-1], ids[i]
	}
	m.subjects[s.Subject] = ids
	if s.ID >= m.next {
		m.next = s.ID + 1
	}
	return nil
}

// ByID implements Registry.
func (m *Memory) ByID(ctx context.Context, id uint32) (Schema, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.byID[id]
	if !ok {
		return Schema{}, notFoundID(id)
	}
	return s, nil
}

// Latest implements Registry.
func (m *Memory) Latest(ctx context.Context, subject string) (Schema, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ids := m.subjects[subject]
	if len(ids) == 0 {
		return Schema{}, notFoundSubject(subject)
	}
	return m.byID[ids[len(ids)-1]], nil
}

// Versions implements Registry.
func (m *Memory) Versions(ctx context.Context, subject string) ([]Schema, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Schema, 0, len(m.subjects[subject]))
	for _, id := range m.subjects[subject] {
		out = append(out, m.byID[id])
	}
	return out, nil
}
