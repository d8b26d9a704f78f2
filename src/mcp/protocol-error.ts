// A JSON-RPC error with our sentence as its message (McpError would prefix "MCP error -32602: "),
// and the error's data where there is something to name.
export const protocolError = (code: number, sentence: string, data?: Record<string, unknown>) =>
  Object.assign(new Error(sentence), { code }, data && { data });
