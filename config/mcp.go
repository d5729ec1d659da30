package config

// MCPConfig is the MCP server at /mcp (docs/mcp.md).
type MCPConfig struct {
	// Enabled turns /mcp on or off; default on (wherever the API is).
	Enabled *bool `yaml:"enabled"`
}

// On reports whether /mcp is served.
func (c MCPConfig) On() bool { return c.Enabled == nil || *c.Enabled }
