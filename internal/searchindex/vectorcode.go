package searchindex

import (
	"encoding/binary"
	"math"
)

// MaxCodedDimensions is the most dimensions a profile's vectors may have
// for the vector index to hold them: a code is half a byte a dimension,
// and the lists index keeps each code in its entries, which PostgreSQL
// bounds to about a third of a page. A profile with more dimensions is
// searched by the signature scan alone.
const MaxCodedDimensions = 4096

// codeHeader is the bytes before a code's components: its scale.
const codeHeader = 4

// EncodeCode returns the 4-bit code of v that the vector index scores
// passages by: a little-endian float32 scale s = max|v_i| / 7, then two
// components a byte, low nibble first, each round(v_i / s) + 8 (1 to 15;
// an odd last byte's high nibble is 8, zero). Scored against a query
// (codeTable.score) a code's error is a few thousandths of a cosine, small
// beside the differences between a query's nearest passages that the
// sign bits of a signature cannot tell apart.
func EncodeCode(v []float32) []byte {
	out := make([]byte, codeHeader+(len(v)+1)/2)
	var mx float32
	for _, x := range v {
		mx = max(mx, float32(math.Abs(float64(x))))
	}
	scale := mx / 7
	binary.LittleEndian.PutUint32(out, math.Float32bits(scale))
	if scale == 0 {
		for i := range out[codeHeader:] {
			out[codeHeader+i] = 0x88
		}
		return out
	}
	for i, x := range v {
		n := byte(int(math.Round(float64(x/scale))) + 8)
		if i%2 == 0 {
			out[codeHeader+i/2] = n
		} else {
			out[codeHeader+i/2] |= n << 4
		}
	}
	if len(v)%2 == 1 {
		out[len(out)-1] |= 8 << 4
	}
	return out
}

// codeTable scores codes against one query: for each byte of a code, the
// query's partial dot products with the 256 values the byte can hold, so
// scoring a code is one addition a byte.
type codeTable []float32

// newCodeTable returns q's table: 256 entries for each pair of its
// components.
func newCodeTable(q []float32) codeTable {
	n := (len(q) + 1) / 2
	t := make(codeTable, 256*n)
	for j := range n {
		a := q[2*j]
		var b float32
		if 2*j+1 < len(q) {
			b = q[2*j+1]
		}
		row := t[256*j : 256*j+256 : 256*j+256]
		for v := range 256 {
			row[v] = a*float32(int(v&15)-8) + b*float32(int(v>>4)-8)
		}
	}
	return t
}

// score returns the code's approximate dot product with the table's query,
// and false for a code of another length than the query's (a row written
// under other dimensions).
func (t codeTable) score(code []byte) (float32, bool) {
	if len(code) < codeHeader || 256*(len(code)-codeHeader) != len(t) {
		return 0, false
	}
	scale := math.Float32frombits(binary.LittleEndian.Uint32(code))
	body := code[codeHeader:]
	var s0, s1, s2, s3 float32
	j := 0
	for ; j+4 <= len(body); j += 4 {
		b := body[j : j+4 : j+4]
		s0 += t[256*j+int(b[0])]
		s1 += t[256*(j+1)+int(b[1])]
		s2 += t[256*(j+2)+int(b[2])]
		s3 += t[256*(j+3)+int(b[3])]
	}
	for ; j < len(body); j++ {
		s0 += t[256*j+int(body[j])]
	}
	return scale * (s0 + s1 + s2 + s3), true
}

// signBits is a vector's signature as machine words: bit i set when
// v[i] > 0 (the same bits Signature stores).
type signBits []uint64

func newSignBits(v []float32) signBits {
	s := make(signBits, (len(v)+63)/64)
	for i, x := range v {
		if x > 0 {
			s[i/64] |= 1 << (i % 64)
		}
	}
	return s
}

// dotFloats is the dot product of two vectors of one length.
func dotFloats(a, b []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	b = b[:len(a)]
	i := 0
	for ; i+8 <= len(a); i += 8 {
		a8 := a[i : i+8 : i+8]
		b8 := b[i : i+8 : i+8]
		s0 += a8[0] * b8[0]
		s1 += a8[1] * b8[1]
		s2 += a8[2] * b8[2]
		s3 += a8[3] * b8[3]
		s4 += a8[4] * b8[4]
		s5 += a8[5] * b8[5]
		s6 += a8[6] * b8[6]
		s7 += a8[7] * b8[7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}

// DecodeVector is a stored vector (EncodeVector) as float32, or an error
// for one whose length is not a whole number of float32.
func DecodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, errVectorLength
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}
