package config

// Reading a configuration file: ${ENV} expansion, decoding with unknown
// keys refused, and the one pass of Check that reports every problem with
// its key and position (problems.go, paths.go).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/cool-ai/beachd/envelope"
	"go.yaml.in/yaml/v3"
)

// Check loads a configuration file and validates it, templates included,
// returning the part-type registry it defines. Every problem names its
// key; all are reported at once. With dev false it is what `beachd serve`
// and `beachd config check` accept; dev true accepts a twilio section
// without credentials and inbound addresses without the email or twilio
// section that receives them, as `beachd render` and `beachd dev` do.
func Check(path string, getenv func(string) string, dev bool) (*Config, *envelope.Registry, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config: %w", err)
	}
	return CheckBytes(raw, path, getenv, dev)
}

// CheckBytes is Check of a file's content; name is the file's name. It
// decodes and validates in one pass and reports every problem it finds
// (see problems.go).
func CheckBytes(raw []byte, name string, getenv func(string) string, dev bool) (*Config, *envelope.Registry, error) {
	cfg, root, probs, err := decodeConfig(raw, getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	refused := map[string]bool{}
	for _, p := range probs {
		refused[p.key] = true
	}
	v := &validator{}
	reg := cfg.check(v)
	cfg.checkServe(v, dev)
	if err := newConfigError(name, root, refused, append(probs, v.items...)); err != nil {
		return nil, nil, err
	}
	cfg.Warnings = placeWarnings(root, v.warnings)
	return cfg, reg, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Load reads, expands and decodes a configuration file. Unknown keys
// are errors; ${ENV} references in values are expanded with getenv, and a
// reference to an unset variable is an error naming the key. It does not
// validate values: Check does.
func Load(path string, getenv func(string) string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(raw, path, getenv)
}

// Parse is Load of a file's content; name is the file's name.
func Parse(raw []byte, name string, getenv func(string) string) (*Config, error) {
	cfg, root, probs, err := decodeConfig(raw, getenv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := newConfigError(name, root, nil, probs); err != nil {
		return nil, err
	}
	return cfg, nil
}

// maxConfigBytes bounds a configuration file.
const maxConfigBytes = 1 << 20

// decodeConfig expands and decodes a configuration file, defaults filled.
// err is a file that cannot be read as yaml at all; probs are the unset
// variables, unknown keys and values of the wrong type, each with its key
// and position, and cfg holds every value that did decode. root is the
// file's node tree, after expansion, positions as written.
func decodeConfig(raw []byte, getenv func(string) string) (cfg *Config, root *yaml.Node, probs []problem, err error) {
	if len(raw) > maxConfigBytes {
		return nil, nil, nil, fmt.Errorf("larger than %d bytes", maxConfigBytes)
	}
	root = &yaml.Node{}
	if err := yaml.Unmarshal(raw, root); err != nil {
		return nil, nil, nil, err
	}
	expandNode(root, "", getenv, &probs)
	cfg = &Config{}
	if len(bytes.TrimSpace(raw)) > 0 && root.Kind != 0 {
		expanded, err := yaml.Marshal(root)
		if err != nil {
			return nil, nil, nil, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(expanded))
		dec.KnownFields(true)
		// On values of the wrong type and unknown keys yaml goes on to the
		// end and keeps what it could decode; describeYAMLError names them.
		if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
			dp, derr := describeYAMLError(err, root)
			if derr != nil {
				return nil, nil, nil, derr
			}
			probs = append(probs, dp...)
		}
	}
	cfg.FillDefaults()
	return cfg, root, probs, nil
}

func expandNode(n *yaml.Node, path string, getenv func(string) string, missing *[]problem) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			expandNode(c, path, getenv, missing)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			expandNode(n.Content[i+1], joinKey(path, n.Content[i].Value), getenv, missing)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			expandNode(c, fmt.Sprintf("%s[%d]", path, i), getenv, missing)
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return
		}
		n.Value = envRef.ReplaceAllStringFunc(n.Value, func(m string) string {
			name := m[2 : len(m)-1]
			v := getenv(name)
			if v == "" {
				*missing = append(*missing, problem{key: path, line: n.Line, col: n.Column,
					reason: fmt.Sprintf("environment variable %s is not set", name)})
			}
			return v
		})
		// Resolve the expanded value's type again (a quoted reference stays a
		// string; an unquoted one may be a number, as if written in place).
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
			n.Tag = ""
		}
	}
}
