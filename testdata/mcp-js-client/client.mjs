// An MCP client on the official TypeScript SDK (@modelcontextprotocol/sdk,
// Streamable HTTP transport) for beachd's tests, driven line by line:
//
//   node client.mjs URL KEY
//
// It connects with "Authorization: Bearer KEY", prints {"ready":true,
// "server":…}, then reads one JSON command per line on stdin —
// {"op":"list"} or {"op":"call","name":…,"arguments":{…}} — and prints one
// JSON answer per line: {"ok":true,"result":…} or {"ok":false,"error":…}.
// The SDK checks every structured result against the tool's output schema
// (tools must be listed first for it to know them).
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key] = process.argv.slice(2);
if (!url || !key) {
  console.error("usage: node client.mjs URL KEY");
  process.exit(2);
}
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "beachd-test-client", version: "1.0.0" });
try {
  await client.connect(transport);
} catch (e) {
  console.log(JSON.stringify({ ready: false, error: String(e?.message ?? e) }));
  process.exit(1);
}
console.log(JSON.stringify({ ready: true, server: client.getServerVersion() }));

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let answer;
  try {
    const cmd = JSON.parse(line);
    let result;
    switch (cmd.op) {
      case "list":
        result = await client.listTools();
        break;
      case "call":
        result = await client.callTool({ name: cmd.name, arguments: cmd.arguments });
        break;
      default:
        throw new Error(`unknown op ${cmd.op}`);
    }
    answer = { ok: true, result };
  } catch (e) {
    answer = { ok: false, error: String(e?.message ?? e) };
  }
  console.log(JSON.stringify(answer));
}
await client.close();
