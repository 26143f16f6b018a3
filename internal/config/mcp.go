package config

// MCP is the Model Context Protocol section, from MAILFATHOM_MCP_<NAME>:
// the bounds of one tool call's answer, both over `mailfathom mcp` (stdio)
// and over serve's /mcp endpoint.
type MCP struct {
	// MaxResults is MAILFATHOM_MCP_MAX_RESULTS, the most messages, folders
	// or mutations one tool call answers with (a caller may ask for fewer),
	// 1 to 500. Default 50.
	MaxResults int
	// MaxCharacters is MAILFATHOM_MCP_MAX_CHARACTERS, the most characters
	// of body text get_email answers with (a caller may ask for fewer), 100
	// to 1000000. Default 20000.
	MaxCharacters int
}

type rawMCP struct {
	MaxResults    string `env:"MAX_RESULTS" envDefault:"50"`
	MaxCharacters string `env:"MAX_CHARACTERS" envDefault:"20000"`
}

func convertMCP(c *converter, raw rawMCP) MCP {
	const p = Prefix + "MCP_"
	return MCP{
		MaxResults:    c.integer(p+"MAX_RESULTS", raw.MaxResults, 1, 500),
		MaxCharacters: c.integer(p+"MAX_CHARACTERS", raw.MaxCharacters, 100, 1_000_000),
	}
}
