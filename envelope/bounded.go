package envelope

import (
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// MaxDecodedParts and MaxDecodedRecipients bound the lists a decoder
// builds before any limit from the configuration is applied. A list of
// empty objects costs a few bytes of input each and a hundred or more of
// memory: an 8 MiB body of `{},` would otherwise become a gigabyte.
const (
	MaxDecodedParts      = 10000
	MaxDecodedRecipients = 10000
)

// Parts is an envelope's part list; it decodes at most MaxDecodedParts.
type Parts []Part

// UnmarshalJSONFrom implements the JSON v2 decoder hook.
func (ps *Parts) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return DecodeList((*[]Part)(ps), dec, MaxDecodedParts, "parts")
}

// DecodeList reads a JSON array (or null) into *out with the decoder's
// options, refusing it once it holds more than max elements, before
// decoding the rest.
func DecodeList[T any](out *[]T, dec *jsontext.Decoder, max int, what string) error {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		*out = nil
		return err
	case '[':
	default:
		_, err := dec.ReadValue()
		if err != nil {
			return err
		}
		return fmt.Errorf("expected an array of %s", what)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	list := make([]T, 0, 4)
	for dec.PeekKind() != ']' {
		if len(list) == max {
			return fmt.Errorf("more than %d %s", max, what)
		}
		var v T
		if err := jsonv2.UnmarshalDecode(dec, &v); err != nil {
			return err
		}
		list = append(list, v)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	*out = list
	return nil
}
