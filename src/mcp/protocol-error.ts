// A JSON-RPC error with our sentence as its message (McpError would prefix "MCP error -32602: ").
export const protocolError = (code: number, sentence: string) => Object.assign(new Error(sentence), { code });
