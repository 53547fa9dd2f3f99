// Package olivares holds what belongs to the repository as a whole: the
// public API's contract, openapi.yaml, embedded so that the coordinator
// serves the very bytes the tests validate against (GET /v1/openapi.yaml
// and /v1/openapi.json).
//
// olivares imports no other package of the module and does no validation:
// the checking lives in integration/contract, which only tests import.
package olivares

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	yaml "go.yaml.in/yaml/v4"
)

// OpenAPIYAML is openapi.yaml as committed: the one description of the
// public API (OpenAPI 3.0.3).
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// OpenAPIJSON converts the document to JSON, keys in the document's order.
// The document is plain YAML: no anchors, aliases, merge keys or tags
// beyond the core schema, so that every tool reads it the same way; a
// document using them is refused.
func OpenAPIJSON() ([]byte, error) { return YAMLToJSON(OpenAPIYAML) }

// YAMLToJSON converts one plain YAML document (see OpenAPIJSON) to JSON.
func YAMLToJSON(in []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(in))
	var doc, more yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || dec.Decode(&more) != io.EOF {
		return nil, errors.New("openapi: want exactly one YAML document")
	}
	var b bytes.Buffer
	if err := writeJSON(&b, doc.Content[0]); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	if n.Anchor != "" {
		return fmt.Errorf("openapi: line %d: anchors are not used in this document", n.Line)
	}
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return fmt.Errorf("openapi: line %d: a key must be a plain scalar", k.Line)
			}
			if seen[k.Value] {
				return fmt.Errorf("openapi: line %d: key %q given twice", k.Line, k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k.Value)
			b.Write(kb)
			b.WriteByte(':')
			if err := writeJSON(b, v); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, v); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		return writeScalar(b, n)
	default:
		return fmt.Errorf("openapi: line %d: aliases are not used in this document", n.Line)
	}
	return nil
}

func writeScalar(b *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!str":
		s, _ := json.Marshal(n.Value)
		b.Write(s)
	case "!!bool":
		v, err := strconv.ParseBool(n.Value)
		if err != nil {
			return fmt.Errorf("openapi: line %d: boolean %q: use true or false", n.Line, n.Value)
		}
		b.WriteString(strconv.FormatBool(v))
	case "!!null":
		b.WriteString("null")
	case "!!int", "!!float":
		if !json.Valid([]byte(n.Value)) {
			return fmt.Errorf("openapi: line %d: number %q: write it as JSON writes numbers", n.Line, n.Value)
		}
		b.WriteString(n.Value)
	default:
		return fmt.Errorf("openapi: line %d: tag %s is not used in this document", n.Line, n.ShortTag())
	}
	return nil
}
