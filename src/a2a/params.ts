// What each method's params must look like on the wire, checked before the SDK decodes them. The
// SDK's decoders turn whatever they find into the type they expect (7 becomes "7", a string part
// an empty one), so a request sent wrong would be carried out as something else, or refused for
// the wrong reason. Only the fields this door reads are named; others are let through, as the
// SDK lets them through. A field may be spelled as in A2A's JSON (messageId) or as in its protocol
// buffers (message_id), as the SDK reads both; null is the field left out, as in proto3 JSON.
// `pageSize` is not checked: a page size is never refused (docs/reference/a2a.md).
type Shape =
  | 'string'
  | 'integer'
  | 'boolean'
  | 'object'
  // An enumeration: its value's name, or its number.
  | 'enum'
  | { list: Shape }
  | { fields: Record<string, Shape>; oneOf?: string[]; like?: string };

// A request's params, which all may name a tenant.
const fields = (shape: Record<string, Shape>): Shape => ({ fields: { tenant: 'string', ...shape } });

const Part: Shape = {
  fields: { text: 'string', raw: 'string', url: 'string', metadata: 'object', filename: 'string', mediaType: 'string' },
  oneOf: ['text', 'raw', 'url', 'data'],
  like: '{"text": "…"}',
};

const Message: Shape = {
  fields: {
    messageId: 'string',
    contextId: 'string',
    taskId: 'string',
    role: 'enum',
    parts: { list: Part },
    metadata: 'object',
    extensions: { list: 'string' },
    referenceTaskIds: { list: 'string' },
  },
};

const PushConfig = fields({
  id: 'string',
  taskId: 'string',
  url: 'string',
  token: 'string',
  authentication: { fields: { scheme: 'string', credentials: 'string' } },
});

const SendMessage = fields({
  message: Message,
  configuration: {
    fields: { acceptedOutputModes: { list: 'string' }, taskPushNotificationConfig: PushConfig, historyLength: 'integer', returnImmediately: 'boolean' },
  },
  metadata: 'object',
});

const ConfigOfTask = fields({ taskId: 'string', id: 'string' });

const METHODS: Record<string, Shape> = {
  SendMessage,
  SendStreamingMessage: SendMessage,
  GetTask: fields({ id: 'string', historyLength: 'integer' }),
  ListTasks: fields({ contextId: 'string', status: 'enum', pageToken: 'string', historyLength: 'integer', statusTimestampAfter: 'string', includeArtifacts: 'boolean' }),
  CancelTask: fields({ id: 'string', metadata: 'object' }),
  SubscribeToTask: fields({ id: 'string' }),
  CreateTaskPushNotificationConfig: PushConfig,
  GetTaskPushNotificationConfig: ConfigOfTask,
  DeleteTaskPushNotificationConfig: ConfigOfTask,
  ListTaskPushNotificationConfigs: fields({ taskId: 'string', pageToken: 'string' }),
  GetExtendedAgentCard: fields({}),
};

export const isA2AMethod = (method: string) => Object.hasOwn(METHODS, method);

// What is wrong with the params of one of A2A's methods, in a sentence naming the field; null when
// nothing is.
export function paramsProblem(method: string, params: unknown): string | null {
  const shape = METHODS[method]!;
  if (params === undefined && method === 'GetExtendedAgentCard') return null;
  if (!isObject(params)) return 'params must be an object.';
  return problemOf(params, shape, '');
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

const snakeCase = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

const at = (path: string, name: string) => (path ? `${path}.${name}` : name);

// A field left out (or null) is undefined here; null is checked only as an item of a list.
function problemOf(value: unknown, shape: Shape, path: string): string | null {
  if (value === undefined) return null;
  switch (shape) {
    case 'string':
      return typeof value === 'string' ? null : `${path} must be a string.`;
    case 'integer':
      return Number.isInteger(value) ? null : `${path} must be a whole number.`;
    case 'boolean':
      return typeof value === 'boolean' ? null : `${path} must be true or false.`;
    case 'object':
      return isObject(value) ? null : `${path} must be an object.`;
    case 'enum':
      return typeof value === 'string' || Number.isInteger(value) ? null : `${path} must be a string.`;
  }
  if ('list' in shape) {
    if (!Array.isArray(value)) return `${path} must be a list.`;
    for (const [i, item] of value.entries()) {
      const problem = problemOf(item, shape.list, `${path}[${i}]`);
      if (problem) return problem;
    }
    return null;
  }
  if (!isObject(value)) return `${path} must be an object${shape.like ? `, such as ${shape.like}` : ''}.`;
  // The SDK reads the camelCase name when it is set, the snake_case one otherwise.
  const given = (name: string): [string, unknown] => {
    if (value[name] !== undefined && value[name] !== null) return [name, value[name]];
    const snake = snakeCase(name);
    return [snake, value[snake] ?? undefined];
  };
  for (const [name, field] of Object.entries(shape.fields)) {
    const [key, inner] = given(name);
    const problem = problemOf(inner, field, at(path, key));
    if (problem) return problem;
  }
  if (shape.oneOf && !shape.oneOf.some((name) => given(name)[1] !== undefined)) {
    const names = shape.oneOf;
    return `${path} must hold one of ${names.slice(0, -1).join(', ')} or ${names.at(-1)}.`;
  }
  return null;
}
