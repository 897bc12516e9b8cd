package report

import (
	"encoding/json"
	"io"
)

// WriteJSON writes the model as one indented JSON document.
func WriteJSON(w io.Writer, m *Model) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(m)
}
