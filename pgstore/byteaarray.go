package pgstore

import "github.com/jackc/pgx/v5/pgtype"

// byteaArray is a bytea[] parameter that pgx encodes without reflection:
// each element goes to the encoder as a pointer into the array (a
// byteaElem), which boxes into an interface without an allocation, where
// a [][]byte costs a reflect.Value and an allocation per element. The
// group commit's statements take several per group (groupcommit.go).
type byteaArray [][]byte

// Dimensions implements pgtype.ArrayGetter: one dimension, 1-based.
func (a byteaArray) Dimensions() []pgtype.ArrayDimension {
	if a == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a)), LowerBound: 1}}
}

// Index implements pgtype.ArrayGetter.
func (a byteaArray) Index(i int) any { return (*byteaElem)(&a[i]) }

// IndexType implements pgtype.ArrayGetter.
func (a byteaArray) IndexType() any { return new(byteaElem) }

// byteaElem is one element of a byteaArray, encoded as its bytes (nil:
// NULL).
type byteaElem []byte

// BytesValue implements pgtype.BytesValuer.
func (e *byteaElem) BytesValue() ([]byte, error) { return *e, nil }
