// Computes the Slack request-signature test vectors of channels/slack
// (testdata/bolt-vectors.json): each request is signed here with Node's
// HMAC, as Slack signs, or deliberately wrongly, and the verdict recorded
// for it is what Slack's official Bolt for JavaScript verifier
// (verifySlackRequest) says at the recorded time. beachd's verifier must
// agree with every verdict.
//
//   node testdata/slack-bolt/vectors.mjs > channels/slack/testdata/bolt-vectors.json
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { verifySlackRequest } from '@slack/bolt';

const bolt = JSON.parse(readFileSync(new URL('./node_modules/@slack/bolt/package.json', import.meta.url))).version;
const secret = '8f742231b10e8888abcd99aaabbb85a5';
const now = 1767225600; // 2026-01-01T00:00:00Z
const sign = (s, ts, body, v = 'v0') => `${v}=` + createHmac('sha256', s).update(`v0:${ts}:${body}`).digest('hex');

const click = 'payload=' + encodeURIComponent(JSON.stringify({
  type: 'block_actions', user: { id: 'U012AB3CD' }, team: { id: 'T0001' }, api_app_id: 'A0001',
  container: { type: 'message', message_ts: '1767225500.000100', channel_id: 'D0123ABCD' },
  channel: { id: 'D0123ABCD' }, message: { ts: '1767225500.000100' }, action_ts: '1767225590.123456',
  actions: [{ type: 'button', action_id: 'beachd_approve', block_id: 'approval:apr_1', value: 'apr_1:n0nce', action_ts: '1767225590.123456' }],
}));
const event = JSON.stringify({ type: 'event_callback', team_id: 'T0001', api_app_id: 'A0001', event_id: 'Ev0001',
  event: { type: 'message', channel_type: 'im', user: 'U012AB3CD', text: 'hello <@U0BOT>', ts: '1767225590.000200', channel: 'D0123ABCD' } });

const cases = [
  { name: 'a button click, signed', secret, ts: now - 10, body: click, sig: sign(secret, now - 10, click) },
  { name: 'an event, signed 299 s ago', secret, ts: now - 299, body: event, sig: sign(secret, now - 299, event) },
  { name: 'stale: signed 301 s ago', secret, ts: now - 301, body: click, sig: sign(secret, now - 301, click) },
  { name: 'signed with another secret', secret, ts: now - 10, body: click, sig: sign('00000000000000000000000000000000', now - 10, click) },
  { name: 'body changed after signing', secret, ts: now - 10, body: click.replace('beachd_approve', 'beachd_deny'), sig: sign(secret, now - 10, click) },
  { name: 'timestamp changed after signing', secret, ts: now - 9, body: click, sig: sign(secret, now - 10, click) },
  { name: 'unknown version v1', secret, ts: now - 10, body: click, sig: sign(secret, now - 10, click, 'v1') },
  { name: 'upper-case hex', secret, ts: now - 10, body: click, sig: 'v0=' + sign(secret, now - 10, click).slice(3).toUpperCase() },
  { name: 'truncated signature', secret, ts: now - 10, body: click, sig: sign(secret, now - 10, click).slice(0, 40) },
  { name: 'empty body, signed', secret, ts: now, body: '', sig: sign(secret, now, '') },
  { name: 'non-ASCII body, signed', secret, ts: now - 1, body: 'payload=%7B%22t%22%3A%22caf%C3%A9%22%7D', sig: sign(secret, now - 1, 'payload=%7B%22t%22%3A%22caf%C3%A9%22%7D') },
];

const out = cases.map((c) => {
  let valid = true;
  let error = '';
  try {
    verifySlackRequest({ signingSecret: c.secret, body: c.body, nowMilliseconds: now * 1000,
      headers: { 'x-slack-signature': c.sig, 'x-slack-request-timestamp': c.ts } });
  } catch (e) {
    valid = false;
    error = String(e.message);
  }
  return { name: c.name, secret: c.secret, timestamp: String(c.ts), body: c.body, signature: c.sig, now, valid, boltError: error };
});
process.stdout.write(JSON.stringify({ verifier: `@slack/bolt ${bolt} verifySlackRequest`, vectors: out }, null, 2) + '\n');
