// @ts-check
// Mint a requestState token for round 2 of increase-counter, verify it as
// round 3 would, and see what a tampered token gets.
import { Client, TransportError, callContext } from '@reqstate/client';

const client = new Client(process.env.REQSTATE_TARGET ?? 'unix:///run/reqstate/reqstate.sock', {
  token: process.env.REQSTATE_TOKEN, // the sidecar's --auth-token-file content, if it has one
  deadlineMs: 2000,
});

// Bind the token to this caller, this server, this method and these exact arguments.
const context = callContext({
  principal: 'user-42',
  audience: 'counter-server',
  method: 'tools/call',
  arguments: { current: 10 },
});

try {
  const { token } = await client.mint({
    tool: 'increase-counter',
    step: 'confirm',
    stateJson: JSON.stringify({ current: 10, amount: 5 }),
    ttlSeconds: 600,
    context,
  });

  // The client echoed it back: verify before trusting anything in it.
  const verified = await client.verify({ token, tool: 'increase-counter', expectedStep: 'confirm', context });
  if (verified.valid) {
    const { current, amount } = JSON.parse(verified.stateJson ?? '{}');
    console.log(`new value: ${current + amount}`);
  }

  // Invalid tokens are results, not exceptions.
  const altered = token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
  const refused = await client.verify({ token: altered, tool: 'increase-counter', context });
  if (!refused.valid) console.log(`tampered: ${refused.reason}`);
} catch (err) {
  // Only calls that did not complete throw: sidecar unreachable, bad bearer token, malformed request.
  if (!(err instanceof TransportError)) throw err;
  console.error(`reqstate call failed: ${err.codeName}: ${err.details}`);
  process.exitCode = 1;
} finally {
  client.close();
}
