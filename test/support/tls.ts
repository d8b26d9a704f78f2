import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';

// A certificate authority made for this test run, and a certificate from it for localhost and
// 127.0.0.1, made with the openssl command; this test process trusts the authority besides the
// usual ones, so that the service's outgoing https requests to a local server verify as they would
// on the internet.
export function localCertificates() {
  const dir = mkdtempSync(join(tmpdir(), 'ams-tls-'));
  const openssl = (...args: string[]) => {
    const run = Bun.spawnSync(['openssl', ...args], { cwd: dir, stderr: 'pipe' });
    if (run.exitCode !== 0) throw new Error(`openssl ${args[0]} failed: ${run.stderr.toString()}`);
  };
  try {
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
    openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Agent Messaging Service test CA',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
    openssl('req', ...ec, '-keyout', 'host.key', '-out', 'host.csr', '-subj', '/CN=localhost');
    writeFileSync(join(dir, 'host.cnf'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
    openssl('x509', '-req', '-in', 'host.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'host.pem', '-days', '2', '-extfile', 'host.cnf');
    const ca = readFileSync(join(dir, 'ca.pem'), 'utf8');
    tls.setDefaultCACertificates([...tls.getCACertificates('default'), ca]);
    return { cert: readFileSync(join(dir, 'host.pem'), 'utf8'), key: readFileSync(join(dir, 'host.key'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
