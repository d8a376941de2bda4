package pgstore

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestByteaArray_EncodesAsSliceOfBytesWithoutAllocationPerElement: a
// byteaArray is encoded as pgx encodes the [][]byte it holds (binary and
// text, with a NULL, an empty and a 0x00 element), with no allocation per
// element (the [][]byte takes one or more each).
func TestByteaArray_EncodesAsSliceOfBytesWithoutAllocationPerElement(t *testing.T) {
	m := pgtype.NewMap()
	const oid = pgtype.ByteaArrayOID
	plain := [][]byte{[]byte("cch_1"), nil, {}, {0, 0xff}, []byte("m-12")}
	for _, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
		want, err := m.Encode(oid, format, plain, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Encode(oid, format, byteaArray(plain), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("format %d: byteaArray encodes as\n%x\nwant\n%x", format, got, want)
		}
	}
	big := make(byteaArray, 64)
	for i := range big {
		big[i] = []byte("cch_bench_42")
	}
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := m.Encode(oid, pgtype.BinaryFormatCode, big, buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs >= float64(len(big)) {
		t.Fatalf("%v allocations to encode %d elements", allocs, len(big))
	}
	plainAllocs := testing.AllocsPerRun(100, func() {
		if _, err := m.Encode(oid, pgtype.BinaryFormatCode, [][]byte(big), buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations to encode %d elements: byteaArray %v, [][]byte %v", len(big), allocs, plainAllocs)
}
