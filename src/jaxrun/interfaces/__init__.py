"""Layer 11: the front ends: the command line, the Python API, the MCP server and A/B sessions."""
