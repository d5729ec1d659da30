// A Beach-like A2A 1.0 agent on the official JavaScript SDK (@a2a-js/sdk
// 1.x), for beachd's tests. It serves the JSON-RPC binding (and, on request,
// the HTTP+JSON binding) WITHOUT the v0.3 compatibility layer, so a client
// that speaks 0.3 gets VERSION_NOT_SUPPORTED.
//
//   node agent.mjs [--port N] [--bindings jsonrpc|rest|both] [--push] [--slow MS] [--slow-jitter MS]
//
// --push says capabilities.pushNotifications in the card: the SDK then
// posts every task update to the push URL a client gives in SendMessage.
//
// It prints one line {"port":N} on stdout once it listens. Behaviour (like
// beachd's a2a-go test agent):
//   "approve:<id>"  -> a task held in TASK_STATE_INPUT_REQUIRED whose status
//                      message carries an approval-request data part;
//   a message into a held task carrying an approval-response data part is
//                      recorded and completes the task;
//   "reply:<text>"  -> answers at once with a Message;
//   "slow:<text>"   -> a task that completes after 400ms, or --slow ms
//                      (callers poll it), plus up to --slow-jitter ms at random;
//   "hold:<text>"   -> like "slow:", but the task works until POST /release
//                      (which completes every task held so far);
//   "echo:<text>"   -> answers at once with a Message in the same context: a
//                      text part and a data part (partType "echo") that
//                      describes what arrived: contextId, messageId, the
//                      message metadata, and each part's kind (text, raw,
//                      url, data), filename, mediaType, size (raw bytes),
//                      url and text;
//   anything else   -> a completed task with a text and a data part.
// POST /release completes the "hold:" tasks at work, and says how many.
// GET /received lists what it received: every request's A2A-Version header
// and method, every message, and every approval-response; and, in order,
// the SendMessage and GetTask calls it served and the pushes it sent
// ("events": {seq, kind: call|push, method | update, state}), and when it
// published each task's final status ("finals": {brief, at: Unix ms}).
import express from 'express';
import { randomUUID } from 'node:crypto';
import { AGENT_CARD_PATH, Role, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultPushNotificationSender, DefaultRequestHandler, InMemoryPushNotificationStore,
  InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
const port = Number(opt('--port', '0'));
const bindings = opt('--bindings', 'jsonrpc');
const push = args.includes('--push');
const slowMs = Number(opt('--slow', '400')); // ms a slow task works
const slowJitter = Number(opt('--slow-jitter', '0')); // ms added at random to a slow task's time

const received = { requests: [], messages: [], approvals: [], events: [], finals: [] };
let held = []; // resolvers of the "hold:" tasks at work
let seq = 0;
const event = (e) => received.events.push({ seq: ++seq, ...e });

const text = (value, partType) => ({
  content: { $case: 'text', value },
  metadata: partType ? { partType } : undefined,
  filename: '',
  mediaType: '',
});
const data = (value, partType) => ({
  content: { $case: 'data', value },
  metadata: partType ? { partType } : undefined,
  filename: '',
  mediaType: '',
});
// describe says what arrived in one part, without its bytes.
const describe = (p) => {
  const kind = p.content?.$case;
  const out = { kind, filename: p.filename ?? '', mediaType: p.mediaType ?? '', metadata: p.metadata ?? null };
  if (kind === 'text') out.text = p.content.value;
  if (kind === 'raw') out.size = p.content.value.length;
  if (kind === 'url') out.url = p.content.value;
  if (kind === 'data') out.data = p.content.value;
  return out;
};
const agentMessage = (taskId, contextId, parts) => ({
  messageId: randomUUID(),
  role: Role.ROLE_AGENT,
  parts,
  taskId,
  contextId,
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const status = (state, message) => ({ state, message, timestamp: new Date().toISOString() });
const statusUpdate = (taskId, contextId, state, message) =>
  AgentEvent.statusUpdate({ taskId, contextId, status: status(state, message), metadata: undefined });

class BeachLikeExecutor {
  cancelTask = async (taskId, bus) => {
    bus.publish(statusUpdate(taskId, '', TaskState.TASK_STATE_CANCELED, undefined));
  };

  async execute(rc, bus) {
    const msg = rc.userMessage;
    const { taskId, contextId } = rc;
    received.messages.push({ messageId: msg.messageId, taskId: msg.taskId, contextId: msg.contextId,
      role: msg.role, metadata: msg.metadata ?? null, parts: msg.parts.map(describe) });
    if (rc.task) {
      for (const p of msg.parts) {
        if (p.content?.$case === 'data' && p.metadata?.partType === 'approval-response') {
          received.approvals.push({ taskId: msg.taskId, contextId: msg.contextId, messageId: msg.messageId,
            response: p.content.value, metadata: p.metadata });
        }
      }
      bus.publish(AgentEvent.task(rc.task));
      bus.publish(statusUpdate(taskId, contextId, TaskState.TASK_STATE_COMPLETED,
        agentMessage(taskId, contextId, [text('Resumed.', 'response')])));
      return;
    }
    const said = msg.parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');
    if (said.startsWith('echo:')) {
      const echo = { contextId: msg.contextId, messageId: msg.messageId, metadata: msg.metadata ?? null,
        parts: msg.parts.map(describe) };
      bus.publish(AgentEvent.message({ ...agentMessage(undefined, contextId,
        [text('Received ' + msg.parts.length + ' parts.', 'response'), data(echo, 'echo')]), taskId: '' }));
      return;
    }
    if (said.startsWith('reply:')) {
      bus.publish(AgentEvent.message({ ...agentMessage(undefined, contextId, [text(said.slice(6))]), taskId: '' }));
      return;
    }
    bus.publish(AgentEvent.task({ id: taskId, contextId, status: status(TaskState.TASK_STATE_SUBMITTED, undefined),
      artifacts: [], history: [msg], metadata: undefined }));
    if (said.startsWith('approve:')) {
      const id = said.slice(8);
      const req = { approvalId: id, toolName: 'book_flight', toolCallId: 'call-' + id,
        args: { flight: 'BA2043', seats: 6 }, handler: 'travel', turn: taskId, session: contextId,
        summary: 'Book BA2043 for 6 people' };
      bus.publish(statusUpdate(taskId, contextId, TaskState.TASK_STATE_INPUT_REQUIRED, agentMessage(taskId, contextId,
        [text('I need your approval to book BA2043.', 'response'), data(req, 'approval-request')])));
      return;
    }
    let brief = said;
    if (said.startsWith('slow:')) {
      brief = said.slice(5);
      bus.publish(statusUpdate(taskId, contextId, TaskState.TASK_STATE_WORKING, undefined));
      await new Promise((resolve) => setTimeout(resolve, slowMs + slowJitter * Math.random()));
    } else if (said.startsWith('hold:')) {
      brief = said.slice(5);
      bus.publish(statusUpdate(taskId, contextId, TaskState.TASK_STATE_WORKING, undefined));
      await new Promise((resolve) => held.push(resolve));
    }
    bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: randomUUID(), name: 'brief', description: '', metadata: undefined, extensions: [],
        parts: [text("Today's brief: " + brief, 'response'), data({ tasks: 3 }, 'domain-data')] } }));
    received.finals.push({ brief, at: Date.now() });
    bus.publish(statusUpdate(taskId, contextId, TaskState.TASK_STATE_COMPLETED, undefined));
  }
}

const app = express();
app.use((req, _res, next) => {
  if (req.path !== '/received' && req.path !== '/release') {
    received.requests.push({ path: req.path, httpMethod: req.method, version: req.header('A2A-Version') ?? null });
  }
  next();
});
const server = app.listen(port, '127.0.0.1', () => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const supportedInterfaces = [];
  if (bindings === 'jsonrpc' || bindings === 'both') {
    supportedInterfaces.push({ url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' });
  }
  if (bindings === 'rest' || bindings === 'both') {
    supportedInterfaces.push({ url: `${base}/a2a/rest`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' });
  }
  const card = {
    name: 'Beach-like test agent',
    description: 'Suspends a turn on an approval-request and resumes on an approval-response.',
    supportedInterfaces,
    version: '1.0.0',
    capabilities: { streaming: false, pushNotifications: push, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text', 'application/json'],
    defaultOutputModes: ['text', 'application/json'],
    skills: [{ id: 'travel', name: 'Travel', description: 'Books flights after approval.', tags: ['travel'],
      examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    documentationUrl: '',
    signatures: [],
  };
  const pushStore = new InMemoryPushNotificationStore();
  const sender = new DefaultPushNotificationSender(pushStore);
  const send = sender.send.bind(sender);
  sender.send = async (streamResponse, context, task) => {
    await send(streamResponse, context, task);
    const p = streamResponse.payload;
    const taskId = p?.$case === 'task' ? p.value.id : p?.value?.taskId;
    if (!taskId || (await pushStore.load(taskId, context)).length === 0) return; // no push URL: nothing sent
    const state = p?.$case === 'task' || p?.$case === 'statusUpdate' ? p.value.status?.state : undefined;
    event({ kind: 'push', update: p?.$case, state: state === undefined ? null : TaskState[state] ?? state });
  };
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new BeachLikeExecutor(),
    undefined, pushStore, sender);
  for (const [name, method] of [['sendMessage', 'SendMessage'], ['getTask', 'GetTask']]) {
    const orig = requestHandler[name].bind(requestHandler);
    requestHandler[name] = async (...a) => {
      event({ kind: 'call', method });
      return orig(...a);
    };
  }
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, cache: { maxAge: 0 } }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  app.use('/a2a/rest', restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
  app.get('/received', (_req, res) => res.json(received));
  app.post('/release', (_req, res) => {
    const n = held.length;
    held.forEach((resolve) => resolve());
    held = [];
    res.json({ released: n });
  });
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
process.on('SIGINT', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
