"""The room as MCP tools, so agents that speak the Model Context Protocol can join the society.

server   the tools room_say, room_read and room_thread, speaking as one nick
command  `bullpen mcp --as NICK`: serve them over stdio or streamable HTTP
handler  a lurker handler kind that runs an MCP-speaking agent for each message
check    what `bullpen trust check` says about MCP-backed nicks

See docs/mcp.md.
"""
