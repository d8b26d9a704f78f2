import { A2A_ERROR_CODE } from '@a2a-js/sdk/errors';

export type JsonRpcId = string | number | null;
export type JsonRpcRequest = { jsonrpc: '2.0'; method: string; params?: unknown; id?: JsonRpcId };
export type JsonRpcFailure = { jsonrpc: '2.0'; id: JsonRpcId; error: { code: number; message: string } };

export const jsonRpcFailure = (id: JsonRpcId, code: number, message: string): JsonRpcFailure => ({ jsonrpc: '2.0', id, error: { code, message } });

// A body read as one JSON-RPC 2.0 request, or the error that answers it: -32700 for a body that is
// not JSON, -32600 for one that is not a request object, with a null id as JSON-RPC 2.0 asks when
// the request's own cannot be trusted. The SDK's transport reads both as invalid params (its
// parse error is wrapped as one), so they are answered here, before it. A request without an id
// is a notification, which gets no reply.
export type ReadRequest = { request: JsonRpcRequest; id: JsonRpcId; notification: boolean } | { refused: JsonRpcFailure };

const invalidRequest = (why: string) => ({ refused: jsonRpcFailure(null, A2A_ERROR_CODE.INVALID_REQUEST, `Invalid Request: ${why}`) });

export function readJsonRpc(body: string): ReadRequest {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch {
    return { refused: jsonRpcFailure(null, A2A_ERROR_CODE.PARSE_ERROR, 'Parse error: the request body is not valid JSON.') };
  }
  // A batch is not taken: each A2A call is its own POST (a stream could not share a reply).
  if (Array.isArray(value)) return invalidRequest('a batch (an array) is not taken here; send one request per POST.');
  if (typeof value !== 'object' || value === null) return invalidRequest('the body must be a JSON-RPC 2.0 request object.');
  const request = value as Record<string, unknown>;
  if (request.jsonrpc !== '2.0') return invalidRequest('jsonrpc must be "2.0".');
  if (typeof request.method !== 'string' || request.method === '') return invalidRequest('method must be the name of a method.');
  const notification = !Object.hasOwn(request, 'id');
  const id = request.id ?? null;
  if (!(typeof id === 'string' || Number.isInteger(id) || id === null)) return invalidRequest('id must be a string, a whole number or null.');
  return { request: request as JsonRpcRequest, id: id as JsonRpcId, notification };
}
