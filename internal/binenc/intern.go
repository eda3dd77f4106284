package binenc

// MaxInterned bounds an Interner: past it, new values are still returned
// but no longer kept.
const MaxInterned = 1024

// Interner hands out one string per distinct value, so that decoding many
// values that repeat (queue, type and worker names, the keys of env and
// metadata maps) allocates each once. A nil Interner allocates every time.
type Interner map[string]string

// String returns b as a string, the one already handed out if equal.
func (in Interner) String(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	if in != nil && len(in) < MaxInterned {
		in[s] = s
	}
	return s
}

// Name reads a string through in (see Interner).
func (r *Reader) Name(in Interner) string { return in.String(r.raw(r.checkUTF8)) }

// NameMap reads a map[string]string as StringMap does, its keys and values
// through in.
func (r *Reader) NameMap(in Interner) map[string]string {
	n := r.Count(MinMapPairLen)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := r.Name(in)
		m[k] = r.Name(in)
	}
	return m
}
