// h2_server.mjs: an HTTP/2-over-TLS test server (Node's http2 module) for the
// worker HTTP client's multiplexing test and benchmark. Not an OpenAI
// simulator: every POST gets a small chat.completion after a delay.
//
//   node h2_server.mjs PORT_FILE CERT KEY LATENCY_MS [MAX_STREAMS]
//
// The path's query may carry delay=N (ms). POST /stats answers
// {"sessions":S,"streams":N}: TLS connections and requests seen so far.
// Listens on 127.0.0.1, an ephemeral port written to PORT_FILE.
import fs from 'node:fs';
import http2 from 'node:http2';

const [portFile, cert, key, latencyArg, maxStreamsArg] = process.argv.slice(2);
const latencyMs = Number(latencyArg || 0);
let sessions = 0;
let streams = 0;

const server = http2.createSecureServer({
    cert: fs.readFileSync(cert),
    key: fs.readFileSync(key),
    settings: { maxConcurrentStreams: Number(maxStreamsArg || 1000) },
});
server.on('session', () => { sessions++; });
server.on('stream', (stream, headers) => {
    const path = headers[':path'] || '/';
    stream.on('error', () => {});
    // Read the request body fully before answering.
    stream.on('data', () => {});
    stream.on('end', () => {
        if (path.startsWith('/stats')) {
            stream.respond({ ':status': 200, 'content-type': 'application/json' });
            stream.end(JSON.stringify({ sessions, streams }));
            return;
        }
        streams++;
        const m = /[?&]delay=(\d+)/.exec(path);
        const delay = m ? Number(m[1]) : latencyMs;
        const id = headers['x-client-request-id'] || '';
        setTimeout(() => {
            if (stream.destroyed) return;
            stream.respond({
                ':status': 200,
                'content-type': 'application/json',
                'x-request-id': 'req_h2',
                'x-ratelimit-limit-requests': '500',
                'x-ratelimit-reset-tokens': '6m0s',
            });
            stream.end(JSON.stringify({
                object: 'chat.completion',
                echo_id: id,
                usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
            }));
        }, delay);
    });
});
server.listen(0, '127.0.0.1', () => {
    const tmp = portFile + '.tmp';
    fs.writeFileSync(tmp, String(server.address().port) + '\n');
    fs.renameSync(tmp, portFile);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
