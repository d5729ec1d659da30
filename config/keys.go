package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// APIKey is one entry of api_keys: a plain string is a full-access key;
// {key: …, role: read} is a read-only key, which may read everything (GET on
// /v1 and the console) and change nothing.
type APIKey struct {
	Key  string `yaml:"key"`
	Role string `yaml:"role"` // "" or "full", or "read"
}

// Roles of API keys.
const (
	RoleFull = "full"
	RoleRead = "read"
)

// UnmarshalYAML accepts a string or a {key, role} mapping, refusing other
// fields.
func (k *APIKey) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		k.Role = ""
		return n.Decode(&k.Key)
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			var dst *string
			switch n.Content[i].Value {
			case "key":
				dst = &k.Key
			case "role":
				dst = &k.Role
			default:
				return fmt.Errorf("line %d: field %s not found in an API key (key, role)", n.Content[i].Line, n.Content[i].Value)
			}
			if err := n.Content[i+1].Decode(dst); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("line %d: an API key is a string or {key: …, role: read}", n.Line)
}

// KeysOf lists the keys of one role ("full" includes the empty role).
func KeysOf(keys []APIKey, role string) []string {
	var out []string
	for _, k := range keys {
		r := k.Role
		if r == "" {
			r = RoleFull
		}
		if r == role {
			out = append(out, k.Key)
		}
	}
	return out
}
