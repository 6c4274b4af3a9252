// A pass-through TCP proxy in front of redis-server that stops passing a
// client's commands on at a chosen command, so a test can kill a process at
// an exact point of a sequence of Redis calls instead of racing it
// (crash_create.sh: a gateway killed mid-way through writing or committing
// a batch). Replies always pass; commands pass whole until the N-th command
// that names a function starting with FUNCTION (an FCALL) and has ARG among
// its arguments has been passed on; from then on every command of every
// connection is held (never sent), and the state file says "held".
//   node redis_hold.mjs REDIS_PORT PORT_FILE STATE_FILE FUNCTION ARG N
// ARG "-" matches any arguments. When a client closes, its Redis connection
// closes too: held commands are dropped, never run.
import fs from 'node:fs';
import net from 'node:net';

const [redisPort, portFile, stateFile, fn, arg, nText] = process.argv.slice(2);
const want = Number(nText);
if (!redisPort || !portFile || !stateFile || !fn || !arg || !(want >= 1)) {
    console.error('usage: node redis_hold.mjs REDIS_PORT PORT_FILE STATE_FILE FUNCTION ARG N');
    process.exit(2);
}
let seen = 0;
let holding = false;

// The length of the first whole RESP command in buf (an array of bulk
// strings, as clients send) and its arguments; null while it is incomplete.
function command(buf) {
    const line = (at) => {
        const end = buf.indexOf('\r\n', at);
        return end < 0 ? null : { text: buf.toString('latin1', at, end), next: end + 2 };
    };
    const head = line(0);
    if (head === null) return null;
    if (head.text[0] !== '*') throw new Error(`not a RESP array: ${head.text.slice(0, 40)}`);
    const args = [];
    let at = head.next;
    for (let i = 0; i < Number(head.text.slice(1)); i++) {
        const len = line(at);
        if (len === null) return null;
        const n = Number(len.text.slice(1));
        if (buf.length < len.next + n + 2) return null;
        args.push(buf.toString('latin1', len.next, len.next + n));
        at = len.next + n + 2;
    }
    return { length: at, args };
}

function matches(args) {
    return (
        args.length > 1 &&
        args[0].toUpperCase() === 'FCALL' &&
        args[1].startsWith(fn) &&
        (arg === '-' || args.includes(arg))
    );
}

const server = net.createServer((client) => {
    const redis = net.connect(Number(redisPort), '127.0.0.1');
    let pending = Buffer.alloc(0);
    redis.pipe(client);
    client.on('data', (data) => {
        pending = Buffer.concat([pending, data]);
        for (;;) {
            if (holding) {
                pending = Buffer.alloc(0);
                return;
            }
            const c = command(pending);
            if (c === null) return;
            redis.write(pending.subarray(0, c.length));
            pending = pending.subarray(c.length);
            if (matches(c.args) && ++seen === want) {
                holding = true;
                fs.writeFileSync(stateFile, 'held\n');
            }
        }
    });
    const close = () => {
        client.destroy();
        redis.destroy();
    };
    client.on('close', close);
    redis.on('close', close);
    client.on('error', close);
    redis.on('error', close);
});
server.listen(0, '127.0.0.1', () => fs.writeFileSync(portFile, `${server.address().port}\n`));
