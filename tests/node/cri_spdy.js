'use strict'
// An independent SPDY/3.1 client (node-spdy's spdy-transport) on
// holdfastd's CRI streaming server, opening streams as client-go does
// (one at a time, each after the last one's reply). Prints one JSON object.
//
// usage: node cri_spdy.js exec|exec-tty|port-forward URL [PORT] [STDIN_BYTES]
const net = require('net')
const transport = require('spdy-transport')

function upgrade (url, protocol) {
  const u = new URL(url)
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: u.hostname, port: +u.port }, () => {
      sock.write(`POST ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\n` +
        'Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' +
        // client-go lists every version it speaks, one header each
        'X-Stream-Protocol-Version: v5.channel.k8s.io\r\n' +
        `X-Stream-Protocol-Version: ${protocol}\r\n` +
        'Content-Length: 0\r\n\r\n')
    })
    let buf = Buffer.alloc(0)
    const onData = (chunk) => {
      buf = Buffer.concat([buf, chunk])
      const i = buf.indexOf('\r\n\r\n')
      if (i < 0) return
      sock.removeListener('data', onData)
      sock.removeListener('error', reject)
      sock.pause()
      const head = buf.subarray(0, i).toString('latin1')
      if (!/^HTTP\/1\.1 101/.test(head)) { sock.destroy(); return reject(new Error(head)) }
      const rest = buf.subarray(i + 4)
      if (rest.length) sock.unshift(rest)
      resolve({ sock, head })
    }
    sock.on('data', onData)
    sock.on('error', reject)
  })
}

function openStream (conn, headers) {
  return new Promise((resolve, reject) => {
    const s = conn.request({ method: 'POST', path: '/', headers })
    // kubelet's replies carry no ':status' (client-go reads none): taken
    // as headers rather than refused.
    s._spdyState.needResponse = false
    s.once('headers', () => resolve(s))
    s.once('response', () => resolve(s))
    s.once('close', () => reject(new Error('stream closed before its reply')))
    s.on('error', () => {})
  })
}

function collect (s) {
  const chunks = []
  s.on('data', (d) => chunks.push(d))
  return new Promise((resolve) => {
    const done = () => resolve(Buffer.concat(chunks))
    s.once('end', done)
    s.once('close', done)
  })
}

async function connect (url, protocol) {
  const { sock, head } = await upgrade(url, protocol)
  const version = (/x-stream-protocol-version: *(\S+)/i.exec(head) || [])[1]
  const conn = transport.connection.create(sock, { protocol: 'spdy', isServer: false, headerCompression: true })
  conn.on('error', () => {})
  // 3.1: the client keeps flow control; the server must give its window back
  conn.start(3.1)
  return { sock, conn, version }
}

async function exec (url, tty, stdinBytes) {
  const { sock, conn, version } = await connect(url, 'v4.channel.k8s.io')
  const error = await openStream(conn, { streamtype: 'error' })
  const stdin = await openStream(conn, { streamtype: 'stdin' })
  const stdout = await openStream(conn, { streamtype: 'stdout' })
  let stderr = null
  let resize = null
  if (tty) resize = await openStream(conn, { streamtype: 'resize' })
  else stderr = await openStream(conn, { streamtype: 'stderr' })
  const outs = [collect(stdout), stderr ? collect(stderr) : Promise.resolve(Buffer.alloc(0)), collect(error)]
  let sent = ''
  if (tty) {
    resize.write(JSON.stringify({ Width: 100, Height: 40 }) + '\n')
    stdin.write('stty size; exit 0\n')
  } else {
    // bytes that differ, past the 64 KiB window
    const payload = Buffer.alloc(stdinBytes)
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 7 + (i >> 8)) & 0xff
    sent = require('crypto').createHash('sha256').update(payload).digest('hex')
    stdin.write(payload)
    stdin.end()
  }
  const [out, err, status] = await Promise.all(outs)
  sock.destroy()
  return {
    version,
    stdout: tty ? out.toString() : out.subarray(0, 64).toString('hex'),
    stdout_sha256: require('crypto').createHash('sha256').update(out).digest('hex'),
    stdout_bytes: out.length,
    sent_sha256: sent,
    stderr: err.toString(),
    status: status.length ? JSON.parse(status.toString()) : null
  }
}

async function portForward (url, port) {
  const { sock, conn, version } = await connect(url, 'portforward.k8s.io')
  const headers = (type) => ({ streamtype: type, port: String(port), requestid: '0' })
  const error = await openStream(conn, headers('error'))
  error.end()
  const data = await openStream(conn, headers('data'))
  const got = [collect(data), collect(error)]
  data.write('GET / HTTP/1.0\r\n\r\n')
  const [response, err] = await Promise.all(got)
  sock.destroy()
  return { version, response: response.toString(), error: err.toString() }
}

async function main () {
  const [what, url, arg] = process.argv.slice(2)
  let out
  if (what === 'exec') out = await exec(url, false, +(process.argv[4] || 200000))
  else if (what === 'exec-tty') out = await exec(url, true, 0)
  else if (what === 'port-forward') out = await portForward(url, +arg)
  else throw new Error('unknown: ' + what)
  console.log(JSON.stringify(out))
}
main().catch((e) => { console.error(e); process.exit(1) })
