package store

import "slices"

// Resources are what a worker offers or one attempt of a job needs. A job
// fits a worker when each of its needs is at most what the worker has free.
type Resources struct {
	VRAMMB    int `json:"vram,omitempty"`
	MemoryMB  int `json:"mem,omitempty"`
	CPUMillis int `json:"cpu,omitempty"`
	Slots     int `json:"slots,omitempty"`
}

// IsZero reports whether r needs (or offers) nothing.
func (r Resources) IsZero() bool { return r == Resources{} }

// Add returns r plus o times sign (+1 or -1).
func (r Resources) Add(o Resources, sign int) Resources {
	return Resources{
		VRAMMB:    r.VRAMMB + sign*o.VRAMMB,
		MemoryMB:  r.MemoryMB + sign*o.MemoryMB,
		CPUMillis: r.CPUMillis + sign*o.CPUMillis,
		Slots:     r.Slots + sign*o.Slots,
	}
}

// Within reports whether every amount of r is at most limit's.
func (r Resources) Within(limit Resources) bool {
	return r.VRAMMB <= limit.VRAMMB && r.MemoryMB <= limit.MemoryMB &&
		r.CPUMillis <= limit.CPUMillis && r.Slots <= limit.Slots
}

// HasTags reports whether offered holds every tag of needed.
func HasTags(offered, needed []string) bool {
	for _, t := range needed {
		if !slices.Contains(offered, t) {
			return false
		}
	}
	return true
}
