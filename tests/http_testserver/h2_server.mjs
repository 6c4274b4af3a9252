// h2_server.mjs: an HTTP/2-over-TLS test server (Node's http2 module) for the
// worker HTTP client's multiplexing test and benchmark. Not an OpenAI
// simulator: every POST gets a small chat.completion after a delay (enough of
// one for the worker to take it as a result).
//
//   node h2_server.mjs PORT_FILE CERT KEY LATENCY_MS [MAX_STREAMS [h1]]
//
// With h1 it speaks HTTP/1.1 over TLS only (Node's https module, no ALPN
// h2): an API behind a proxy that does not negotiate HTTP/2.
// The path's query may carry delay=N (ms). POST /stats answers
// {"sessions":S,"streams":N}: TLS connections and requests seen so far.
// Listens on 127.0.0.1, an ephemeral port written to PORT_FILE.
import fs from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';

const [portFile, cert, key, latencyArg, maxStreamsArg, mode] = process.argv.slice(2);
const latencyMs = Number(latencyArg || 0);
let sessions = 0;
let streams = 0;

// Answers one request whose body has been read: send(status, headers, body).
function answer(path, id, isGone, send) {
    if (path.startsWith('/stats')) {
        send(200, { 'content-type': 'application/json' }, JSON.stringify({ sessions, streams }));
        return;
    }
    streams++;
    const m = /[?&]delay=(\d+)/.exec(path);
    const delay = m ? Number(m[1]) : latencyMs;
    setTimeout(() => {
        if (isGone()) return;
        send(200, {
            'content-type': 'application/json',
            'x-request-id': 'req_h2',
            'x-ratelimit-limit-requests': '500',
            'x-ratelimit-reset-tokens': '6m0s',
        }, JSON.stringify({
            object: 'chat.completion',
            echo_id: id,
            choices: [{ index: 0, message: { role: 'assistant', content: 'ok' },
                finish_reason: 'stop' }],
            usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
        }));
    }, delay);
}

let server;
if (mode === 'h1') {
    server = https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) },
        (req, res) => {
            req.on('error', () => {});
            req.on('data', () => {});
            req.on('end', () => {
                answer(req.url || '/', req.headers['x-client-request-id'] || '',
                    () => res.destroyed, (status, headers, body) => {
                        res.writeHead(status, headers);
                        res.end(body);
                    });
            });
        });
    server.on('secureConnection', () => { sessions++; });
} else {
    server = http2.createSecureServer({
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
            answer(path, headers['x-client-request-id'] || '', () => stream.destroyed,
                (status, hdrs, body) => {
                    stream.respond({ ':status': status, ...hdrs });
                    stream.end(body);
                });
        });
    });
}
server.listen(0, '127.0.0.1', () => {
    const tmp = portFile + '.tmp';
    fs.writeFileSync(tmp, String(server.address().port) + '\n');
    fs.renameSync(tmp, portFile);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
