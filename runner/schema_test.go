package runner

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/skillpilot/skillpilot/protocol"
)

var (
	schemaOnce sync.Once
	schemaSet  map[string]*jsonschema.Schema
)

// validateFile checks b against the protocol's embedded schema name.
func validateFile(t testing.TB, name string, b []byte) {
	t.Helper()
	schemaOnce.Do(func() {
		schemaSet = map[string]*jsonschema.Schema{}
		c := jsonschema.NewCompiler()
		names, _ := fs.Glob(protocol.Schemas(), "*.json")
		for _, n := range names {
			raw, _ := fs.ReadFile(protocol.Schemas(), n)
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				panic(err)
			}
			if err := c.AddResource(n, doc); err != nil {
				panic(err)
			}
		}
		for _, n := range names {
			schemaSet[n] = c.MustCompile(n)
		}
	})
	s := schemaSet[name]
	if s == nil {
		t.Fatalf("no schema %s", name)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: not JSON: %v", name, err)
	}
	if err := s.Validate(doc); err != nil {
		t.Fatalf("%s does not validate: %v\n%s", name, err, b)
	}
	_ = json.Valid
}
