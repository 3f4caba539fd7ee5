"""The MCP wing, both directions. The site as an MCP server: ``server`` (the endpoint),
``tokens`` and ``api_tokens`` (its bearer tokens), ``calls`` (clients' tool calls through the
chat pipeline). Remote MCP servers the agent uses: ``tools`` (their tools, a tool source of the
registry), ``client`` (the SDK seam), ``client_oauth`` (OAuth discovery, registration,
tokens), ``credentials`` (the users' credentials, sealed by the vault), ``api`` (the user's
connections). ``models``, ``admin``, ``admin_tokens`` and ``checks`` as Django names them.
Nothing is imported here: the app's models module loads ``models`` early."""
