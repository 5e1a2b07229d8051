// The TypeScript MCP SDK's client, as a Node.js MCP host drives a server: lists the tools
// and calls web_search, then prints {"tools": [...], "search": <the call's result>} as JSON.
// argv[2] is the server: {"url": ...} for Streamable HTTP, or {"command", "args", "env",
// "cwd"} for stdio; argv[3] is the query.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const server = JSON.parse(process.argv[2]);
const transport = server.url
  ? new StreamableHTTPClientTransport(new URL(server.url))
  : new StdioClientTransport(server);
const client = new Client({ name: "node-test", version: "1" });
await client.connect(transport);
try {
  const { tools } = await client.listTools();
  const search = await client.callTool(
    { name: "web_search", arguments: { query: process.argv[3] } },
    undefined,
    { timeout: 60000 },
  );
  process.stdout.write(JSON.stringify({ tools: tools.map((tool) => tool.name), search }));
} finally {
  await client.close();
}
