package binenc

// Codec writes values, or reads them back into the same variables, so that
// a layout is one walk over a value's fields (one Codec call per field, in
// order) that serves as both its encoder and its decoder: a field cannot be
// written and not read, or read in another place. A writing Codec
// (Writing) appends, in the encodings this package's Append functions
// write, and Written returns the bytes; a reading one (Reading) reads from
// R, whose error sticks as ever. Each method takes a pointer to the field;
// reading sets it as the Reader method of the same encoding does.
//
// Encoders and decoders run the walk through Writer and FieldReader
// instead: cmd walkgen (internal/tools/walkgen) generates from a walk a
// copy of it for each, with Reading() folded, so that a field costs no
// call more than a hand-written codec's. A Codec runs the walk itself, in
// the tests that check the generated copies against it.
type Codec struct {
	R       Reader // what a reading Codec reads
	b       []byte // what a writing Codec has written
	reading bool
}

// Writing returns a Codec that appends to b.
func Writing(b []byte) Codec { return Codec{b: b} }

// Reading returns a Codec that reads from r.
func Reading(r Reader) Codec { return Codec{R: r, reading: true} }

// Reading reports whether c reads (else it writes).
func (c *Codec) Reading() bool { return c.reading }

// Written returns what a writing Codec has written.
func (c *Codec) Written() []byte { return c.b }

// Append writes through an Append function: c.Append(AppendX(c.Written(),
// v)) for an encoding that has no method here.
func (c *Codec) Append(b []byte) { c.b = b }

// String is a string (AppendString, Reader.Str).
func (c *Codec) String(p *string) {
	if c.reading {
		*p = c.R.Str()
		return
	}
	c.b = AppendString(c.b, *p)
}

// Bytes is a byte slice (AppendBytes, Reader.Bytes: nil when empty).
func (c *Codec) Bytes(p *[]byte) {
	if c.reading {
		*p = c.R.Bytes()
		return
	}
	c.b = AppendBytes(c.b, *p)
}

// Uvarint is an unsigned integer.
func (c *Codec) Uvarint(p *uint64) {
	if c.reading {
		*p = c.R.Uvarint()
		return
	}
	c.b = AppendUvarint(c.b, *p)
}

// Varint is a signed integer.
func (c *Codec) Varint(p *int64) {
	if c.reading {
		*p = c.R.Varint()
		return
	}
	c.b = AppendVarint(c.b, *p)
}

// Int is a signed integer that must fit an int.
func (c *Codec) Int(p *int) {
	if c.reading {
		*p = c.R.Int()
		return
	}
	c.b = AppendInt(c.b, *p)
}

// Time is a time in Unix nanoseconds, 8 bytes.
func (c *Codec) Time(p *int64) {
	if c.reading {
		*p = c.R.Time()
		return
	}
	c.b = AppendTime(c.b, *p)
}

// Float is a float64, -0 written as 0; the writer's caller refuses NaN
// and infinities (Finite) before it writes.
func (c *Codec) Float(p *float64) {
	if c.reading {
		*p = c.R.Float()
		return
	}
	c.b = AppendFloat(c.b, *p)
}

// Bool is a bool.
func (c *Codec) Bool(p *bool) {
	if c.reading {
		*p = c.R.Bool()
		return
	}
	c.b = AppendBool(c.b, *p)
}

// IntPtr is an *int: nil when not set.
func (c *Codec) IntPtr(p **int) {
	if c.reading {
		*p = c.R.IntPtr()
		return
	}
	c.b = AppendIntPtr(c.b, *p)
}

// Strings is a list of strings (nil when empty).
func (c *Codec) Strings(p *[]string) {
	if c.reading {
		*p = c.R.Strings()
		return
	}
	c.b = AppendStrings(c.b, *p)
}

// Map is a map of strings (nil when empty), written in key order.
func (c *Codec) Map(p *map[string]string) {
	if c.reading {
		*p = c.R.StringMap()
		return
	}
	c.b = AppendMap(c.b, *p)
}

// Count is a list's length, *p: written, or read into *p (checked against
// the bytes left for items of at least min bytes each, see Reader.Count).
func (c *Codec) Count(p *int, min int) {
	if c.reading {
		*p = c.R.Count(min)
		return
	}
	c.b = AppendUvarint(c.b, uint64(*p))
}

// Writer is a writing Codec as functions of the bytes written so far: each
// method appends one field as the Codec method of the same name writes it,
// and is small enough to be inlined. Encoders that walkgen generates from a
// walk call it, so that encoding costs no call per field.
type Writer struct{}

// String appends *p as Codec.String writes it.
func (Writer) String(b []byte, p *string) []byte { return AppendString(b, *p) }

// Bytes appends *p as Codec.Bytes writes it.
func (Writer) Bytes(b []byte, p *[]byte) []byte { return AppendBytes(b, *p) }

// Uvarint appends *p as Codec.Uvarint writes it.
func (Writer) Uvarint(b []byte, p *uint64) []byte { return AppendUvarint(b, *p) }

// Varint appends *p as Codec.Varint writes it.
func (Writer) Varint(b []byte, p *int64) []byte { return AppendVarint(b, *p) }

// Int appends *p as Codec.Int writes it.
func (Writer) Int(b []byte, p *int) []byte { return AppendInt(b, *p) }

// Time appends *p as Codec.Time writes it.
func (Writer) Time(b []byte, p *int64) []byte { return AppendTime(b, *p) }

// Float appends *p as Codec.Float writes it.
func (Writer) Float(b []byte, p *float64) []byte { return AppendFloat(b, *p) }

// Bool appends *p as Codec.Bool writes it.
func (Writer) Bool(b []byte, p *bool) []byte { return AppendBool(b, *p) }

// IntPtr appends *p as Codec.IntPtr writes it.
func (Writer) IntPtr(b []byte, p **int) []byte { return AppendIntPtr(b, *p) }

// Strings appends *p as Codec.Strings writes it.
func (Writer) Strings(b []byte, p *[]string) []byte { return AppendStrings(b, *p) }

// Map appends *p as Codec.Map writes it.
func (Writer) Map(b []byte, p *map[string]string) []byte { return AppendMap(b, *p) }

// Count appends *p as Codec.Count writes it.
func (Writer) Count(b []byte, p *int, _ int) []byte { return AppendUvarint(b, uint64(*p)) }

// FieldReader is a reading Codec without the choice: each method reads one
// field as the Codec method of the same name reads it, and is small enough
// to be inlined. Decoders that walkgen generates from a walk call it.
type FieldReader struct {
	R Reader
}

// String reads *p as Codec.String does.
func (c *FieldReader) String(p *string) { *p = c.R.Str() }

// Bytes reads *p as Codec.Bytes does.
func (c *FieldReader) Bytes(p *[]byte) { *p = c.R.Bytes() }

// Uvarint reads *p as Codec.Uvarint does.
func (c *FieldReader) Uvarint(p *uint64) { *p = c.R.Uvarint() }

// Varint reads *p as Codec.Varint does.
func (c *FieldReader) Varint(p *int64) { *p = c.R.Varint() }

// Int reads *p as Codec.Int does.
func (c *FieldReader) Int(p *int) { *p = c.R.Int() }

// Time reads *p as Codec.Time does.
func (c *FieldReader) Time(p *int64) { *p = c.R.Time() }

// Float reads *p as Codec.Float does.
func (c *FieldReader) Float(p *float64) { *p = c.R.Float() }

// Bool reads *p as Codec.Bool does.
func (c *FieldReader) Bool(p *bool) { *p = c.R.Bool() }

// IntPtr reads *p as Codec.IntPtr does.
func (c *FieldReader) IntPtr(p **int) { *p = c.R.IntPtr() }

// Strings reads *p as Codec.Strings does.
func (c *FieldReader) Strings(p *[]string) { *p = c.R.Strings() }

// Map reads *p as Codec.Map does.
func (c *FieldReader) Map(p *map[string]string) { *p = c.R.StringMap() }

// Count reads *p as Codec.Count does.
func (c *FieldReader) Count(p *int, min int) { *p = c.R.Count(min) }
