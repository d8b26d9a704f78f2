// A mail server that accepts every message and keeps it: the real SMTP conversation nodemailer
// holds with a relay, on a local port, so a test reads the mail people would have received.
export type Received = { from: string; to: string[]; data: string };

// A message's headers and its body as read, quoted-printable undone (nodemailer wraps long lines).
export function readMail(m: Received) {
  const [head, ...body] = m.data.split('\n\n');
  const text = body.join('\n\n');
  const quoted = /content-transfer-encoding: quoted-printable/i.test(head!);
  return {
    subject: /^subject: (.*)$/im.exec(head!)?.[1] ?? null,
    text: quoted ? text.replace(/=\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16))) : text,
  };
}

export function smtpSink() {
  const received: Received[] = [];
  const waiting = new Set<() => void>();
  type Session = { buffer: string; inData: boolean; from: string; to: string[]; data: string };
  const server = Bun.listen<Session>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        socket.data = { buffer: '', inData: false, from: '', to: [], data: '' };
        socket.write('220 sink ready\r\n');
      },
      data(socket, chunk) {
        const s = socket.data;
        s.buffer += chunk.toString('utf8');
        for (let end = s.buffer.indexOf('\r\n'); end !== -1; end = s.buffer.indexOf('\r\n')) {
          const line = s.buffer.slice(0, end);
          s.buffer = s.buffer.slice(end + 2);
          if (s.inData) {
            if (line === '.') {
              s.inData = false;
              received.push({ from: s.from, to: s.to, data: s.data });
              s.to = [];
              s.data = '';
              waiting.forEach((wake) => wake());
              socket.write('250 kept\r\n');
            } else s.data += `${line.startsWith('..') ? line.slice(1) : line}\n`;
            continue;
          }
          const verb = line.slice(0, 4).toUpperCase();
          if (verb === 'MAIL') s.from = line.slice(10).replace(/[<>]/g, '').split(' ')[0]!;
          if (verb === 'RCPT') s.to.push(line.slice(8).replace(/[<>]/g, ''));
          if (verb === 'DATA') {
            s.inData = true;
            socket.write('354 go on\r\n');
          } else if (verb === 'QUIT') {
            socket.write('221 bye\r\n');
            socket.end();
          } else socket.write('250 OK\r\n');
        }
      },
    },
  });
  return {
    url: `smtp://127.0.0.1:${server.port}`,
    received,
    // Resolves once `ready` holds of what arrived.
    async waitFor(ready: () => boolean) {
      while (!ready()) {
        await new Promise<void>((wake) => {
          const once = () => {
            waiting.delete(once);
            wake();
          };
          waiting.add(once);
        });
      }
    },
    stop: () => server.stop(true),
  };
}
