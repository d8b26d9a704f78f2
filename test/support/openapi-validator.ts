import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { EXAMPLE_REQUEST_ID } from '../../src/web/envelope';
import type { Reply } from './harness';

type Json = Record<string, any>;

// Headers any HTTP server adds whatever the route; everything else a response carries must be in
// the document.
const TRANSPORT_HEADERS = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'transfer-encoding']);

// Checks answers against the published OpenAPI document, as a validating proxy in front of the
// service would: the status must be documented for the operation, the body must match its schema,
// and every header must be documented. It also records what it saw, so that a test can demand
// that every documented status and example sentence really occurs.
export function openApiValidator(doc: Json) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ ...doc, $id: 'openapi.json' });
  const compiled = new Map<string, ValidateFunction>();
  const validatorAt = (pointer: string) => {
    let validate = compiled.get(pointer);
    if (!validate) {
      validate = ajv.compile({ $ref: `openapi.json#${pointer}` });
      compiled.set(pointer, validate);
    }
    return validate;
  };

  const resolve = (node: Json): Json =>
    typeof node.$ref === 'string' ? node.$ref.slice(2).split('/').reduce((at: Json, key: string) => at[key], doc) : node;

  const operations = Object.entries(doc.paths as Json).flatMap(([template, item]) =>
    Object.entries(item as Json).map(([method, operation]) => ({
      template,
      method: method.toUpperCase(),
      operation: operation as Json,
      // Path parameters match one segment, as a router matches them.
      pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    })),
  );
  // operationId → status → error sentences seen.
  const seen = new Map<string, Map<string, Set<string>>>();

  function operationOf(method: string, path: string) {
    const bare = path.split('?')[0]!;
    const found = operations.find((o) => o.method === method && o.pattern.test(bare));
    if (!found) throw new Error(`${method} ${bare} is not in the document`);
    return found;
  }

  return {
    operations,
    operationOf,
    check(method: string, path: string, reply: Reply): void {
      const { template, operation } = operationOf(method, path);
      const body = reply.body as { success?: boolean; error?: string };
      const where = `${operation.operationId} (${method} ${path}) answered ${reply.status}`;
      const status = String(reply.status);
      const answer = operation.responses[status];
      if (!answer) throw new Error(`${where}, a status the document does not list: ${JSON.stringify(reply.body)}`);
      const pointer = `/paths/${template.replaceAll('~', '~0').replaceAll('/', '~1')}/${method.toLowerCase()}/responses/${status}`;
      const type = reply.headers.get('content-type') ?? '';
      // A file's bytes are any bytes of any type (their tests check them); an answer documented
      // without content has none.
      const content = (answer as Json).content as Json | undefined;
      if (content === undefined) {
        if (reply.body !== '') throw new Error(`${where} with a body, where the document says it has none`);
      } else if (content['*/*'] === undefined) {
        // A stream of server-sent events is checked by its type; its events, by the tests of the stream.
        const streamed = type.startsWith('text/event-stream') && content['text/event-stream'] !== undefined;
        if (!streamed && !type.startsWith('application/json')) throw new Error(`${where} with Content-Type ${type}, not application/json`);
        const validate = validatorAt(`${pointer}/content/${streamed ? 'text~1event-stream' : 'application~1json'}/schema`);
        if (!validate(streamed ? String(reply.body) : reply.body)) {
          throw new Error(`${where} with a body the document does not allow: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(reply.body)}`);
        }
      }
      const documented = new Map(
        Object.entries((answer.headers ?? {}) as Json).map(([name, header]) => [name.toLowerCase(), resolve(header)]),
      );
      for (const [name, value] of reply.headers) {
        if (TRANSPORT_HEADERS.has(name)) continue;
        const header = documented.get(name);
        if (!header) throw new Error(`${where} with header ${name}, which the document does not list`);
        if (!ajv.validate(header.schema, value)) throw new Error(`${where} with header ${name}: ${value}, which its schema refuses`);
      }
      for (const [name, header] of documented) {
        if (header.required && !reply.headers.has(name)) throw new Error(`${where} without the required header ${name}`);
      }
      const byStatus = seen.get(operation.operationId) ?? new Map<string, Set<string>>();
      seen.set(operation.operationId, byStatus);
      const sentences = byStatus.get(status) ?? new Set<string>();
      byStatus.set(status, sentences);
      // A 500 quotes its request id; the document's example quotes a sample one.
      const id = reply.headers.get('x-request-id');
      if (body?.success === false && body.error !== undefined) sentences.add(id ? body.error.replace(id, EXAMPLE_REQUEST_ID) : body.error);
    },
    // What the document promises that no answer showed: statuses never answered, and example
    // sentences never said under their status.
    unseen(): string[] {
      const missing: string[] = [];
      for (const { operation } of operations) {
        const byStatus = seen.get(operation.operationId);
        for (const [status, answer] of Object.entries(operation.responses as Json)) {
          const sentences = byStatus?.get(status);
          if (!sentences) {
            missing.push(`${operation.operationId} ${status}`);
            continue;
          }
          const examples = (answer as Json).content?.['application/json']?.examples ?? {};
          for (const [name, example] of Object.entries(examples as Json)) {
            if (!sentences.has(example.value.error)) missing.push(`${operation.operationId} ${status} example ${name}: "${example.value.error}"`);
          }
        }
      }
      return missing;
    },
  };
}
