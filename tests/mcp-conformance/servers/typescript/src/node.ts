// The Node entry: node:http on 127.0.0.1:$PORT, one fetch-shaped app (wiring.ts) behind it.
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { createApp, settingsFromEnv } from './wiring.js';

const app = createApp(settingsFromEnv(process.env, (line) => process.stderr.write(`${line}\n`)));
const port = Number(process.env.PORT ?? '0');

async function toRequest(req: IncomingMessage, base: string): Promise<Request> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (Array.isArray(v)) for (const x of v) headers.append(k, x);
    else if (v !== undefined) headers.set(k, v);
  }
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  return new Request(new URL(req.url ?? '/', base), { method: req.method, headers, body: hasBody ? Buffer.concat(chunks) : undefined });
}

async function serve(req: IncomingMessage, res: ServerResponse, base: string) {
  const response = await app(await toRequest(req, base));
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body) Readable.fromWeb(response.body as import('node:stream/web').ReadableStream).pipe(res);
  else res.end();
}

const http = createHttpServer((req, res) => {
  const addr = http.address();
  const base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : port}`;
  serve(req, res, base).catch((e) => {
    process.stderr.write(`request failed: ${e instanceof Error ? e.stack : String(e)}\n`);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
http.listen(port, '127.0.0.1', () => {
  const addr = http.address();
  process.stdout.write(`listening http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : port}/mcp\n`);
});
for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => http.close(() => process.exit(0)));
