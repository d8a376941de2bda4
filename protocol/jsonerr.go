package protocol

import (
	"errors"

	jsonv2 "github.com/go-json-experiment/json"
)

// jsonErrText is a decoder error as a peer should read it: the JSON pointer
// of the bad member and the cause, without the Go type names the codec adds.
// The root package has the same helper for the profile's payloads; it is
// not exported there, to keep the root's API to the profile.
func jsonErrText(err error) string {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) && se.Err != nil {
		if se.JSONPointer != "" {
			return string(se.JSONPointer) + ": " + se.Err.Error()
		}
		return se.Err.Error()
	}
	return err.Error()
}
